"""Each file the sglang_server module keeps for the running server, changed alone behind its back: opened to
others, and where the module writes its text, edited. The next run of the role sets it back; after the last the
role changes nothing and the server answers. The list is the module's own (its managed result): a file it starts
to keep is changed here too."""
import sys
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(CHECKOUT / "tests" / "integration"))
from role_drift import changed, drift_each, managed_changes, role_alone  # noqa: E402

testinfra_hosts = ["docker://sglang-systemd"]
# The role and the module it runs share the name.
ROLE = MODULE = "blackwell.gpu_node.sglang_server"


def test_each_file_the_module_keeps_changed_alone_is_set_back(tmp_path, host):
    run_role = role_alone(tmp_path, ROLE, "all")
    ran = run_role()
    assert changed(ran) == []
    task = next(name for name, result in ran.items() if result.get("action") == MODULE)
    files = ran[task]["managed"]
    # The log, the unit, the pid, state, secret environment, launch history and last good launch files, the
    # logrotate file; the text of the unit, the secret environment file and the logrotate file.
    assert len(files) == 8 and sum(thing["text"] for thing in files) == 3, files
    ran = drift_each(run_role, managed_changes(host, task, files))
    assert ran[task]["running"], ran[task]
