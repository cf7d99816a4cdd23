"""Each file the sglang_server module keeps for the running server, changed alone behind its back: opened to
others, and where the module writes its text, edited. The next run of the role sets it back; after the last the
role changes nothing and the server answers. The list is the module's own (its managed result): a file it starts
to keep is changed here too."""
import sys
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(CHECKOUT / "tests" / "integration"))
from role_drift import role_alone  # noqa: E402

testinfra_hosts = ["docker://sglang-systemd"]
# The role and the module it runs share the name.
ROLE = MODULE = "blackwell.gpu_node.sglang_server"


def sha1(host, path):
    return host.check_output("sha1sum %s", path).split()[0]


def mode_is_kept(host, thing):
    mode = host.file(thing["path"]).mode
    return mode & 0o007 == 0 if thing["mode"] is None else "%04o" % mode == thing["mode"]


def test_each_file_the_module_keeps_changed_alone_is_set_back(tmp_path, host):
    run_role = role_alone(tmp_path, ROLE, "all")

    def launch():
        """The module's result in a run of the role alone."""
        return next(result for result in run_role().values() if result.get("action") == MODULE)

    result = launch()
    assert not result["changed"], result["actions"]
    files = result["managed"]
    # The log, the unit, the pid, state, secret environment and launch history files, the logrotate file; the
    # text of the unit, the secret environment file and the logrotate file.
    assert len(files) == 7 and sum(thing["text"] for thing in files) == 3, files
    for thing in files:
        host.check_output("chmod o+rw %s", thing["path"])
        assert not mode_is_kept(host, thing)
        result = launch()
        assert result["changed"] and mode_is_kept(host, thing), (thing, result["actions"])
        if thing["text"]:
            before = sha1(host, thing["path"])
            host.check_output("printf '# edited by hand\\n' >> %s", thing["path"])
            result = launch()
            assert result["changed"] and sha1(host, thing["path"]) == before, (thing, result["actions"])
    result = launch()
    assert not result["changed"] and result["running"], result["actions"]
