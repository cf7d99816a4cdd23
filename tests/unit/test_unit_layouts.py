"""The unit tests run the same way through `make units` and through `ansible-test units`."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[2]

PROBE = '''
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.text import control_character_problem


def test_the_collection_imports_by_its_name():
    assert control_character_problem("a\\nb", "x")
'''


def test_a_checkout_laid_out_as_ansible_collections_needs_no_build_link(tmp_path):
    """ansible-test units runs in ansible_collections/<ns>/<name>, where no .build/collections link exists."""
    collection = tmp_path / "ansible_collections" / "blackwell" / "gpu_node"
    shutil.copytree(CHECKOUT / "plugins", collection / "plugins")
    (collection / "tests" / "unit").mkdir(parents=True)
    shutil.copy(CHECKOUT / "tests" / "unit" / "conftest.py", collection / "tests" / "unit" / "conftest.py")
    (collection / "tests" / "unit" / "test_probe.py").write_text(PROBE)
    # Only PATH and HOME: not the plugins and paths of the pytest (or ansible-test) running this test.
    env = {name: os.environ[name] for name in ("PATH", "HOME") if name in os.environ}
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/unit"],
                         cwd=collection, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 passed" in run.stdout
