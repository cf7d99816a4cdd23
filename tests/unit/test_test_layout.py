"""One pytest run over tests/unit and tests/integration collects both: without __init__.py files pytest imports
each test file by its basename, and two files of one basename fail to collect ("import file mismatch")."""
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_unit_and_integration_test_files_do_not_share_a_basename():
    names = {}
    for suite in ("unit", "integration"):
        for path in (ROOT / "tests" / suite).rglob("*.py"):
            if path.name != "conftest.py":
                names.setdefault(path.name, []).append(str(path.relative_to(ROOT)))
    assert {name: paths for name, paths in names.items() if len(paths) > 1} == {}
