"""The hostile-user suite: each module run as root against a tree an unprivileged user made as bad as it can
(hostile_harness.py says how, and which environment variables point it at another checkout or make it only
report). The table of module x case is printed at the end and written to .build/hostile/table.txt."""
import os
import shutil
import tempfile
from pathlib import Path

import pytest

import hostile_harness

_TABLE = []


@pytest.fixture(scope="session")
def collection():
    return hostile_harness.Collection(hostile_harness.collections_root())


@pytest.fixture(scope="session")
def hostile_user():
    if os.geteuid() != 0:
        pytest.skip("the hostile-user suite runs as root: it creates a user and runs the modules as root")
    return hostile_harness.ensure_user()


@pytest.fixture(scope="session")
def hostile_base(hostile_user):
    """Root's directory for every case's tree; removed with all the user put there (the account stays)."""
    base = Path(tempfile.mkdtemp(prefix="blackwell-hostile-", dir="/var/tmp"))
    base.chmod(0o755)
    yield base
    shutil.rmtree(str(base), ignore_errors=True)


@pytest.fixture(scope="session")
def table(collection):
    made = hostile_harness.Table(collection)
    _TABLE.append(made)
    return made


@pytest.fixture
def hostile(hostile_base, hostile_user, collection, table):
    """hostile(module, case): a new Case, its tree removed after the test."""
    cases = []

    def make(module, name):
        case = hostile_harness.Case(hostile_base, hostile_user, collection, table, module, name)
        cases.append(case)
        return case

    yield make
    for case in cases:
        if not case.recorded:
            table.add(case.module_name, case.name, "ERROR", None, None,
                      ["the test stopped before its verdict (see pytest's report)"] + case.problems)
        case.cleanup()


def pytest_terminal_summary(terminalreporter):
    for made in [made for made in _TABLE if made.rows]:
        terminalreporter.write_sep("=", "hostile-user table (%s)" % hostile_harness.TABLE)
        terminalreporter.write(made.text())


def pytest_sessionfinish(session):
    for made in [made for made in _TABLE if made.rows]:
        made.write()
