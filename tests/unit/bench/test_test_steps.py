"""bench/test_steps.py's rows, the commands --dry-run prints for them, and --from-log's reading of a beside.times.
Nothing here runs make: subprocess.run fails the test if called."""
import importlib.util
import re
import subprocess
from pathlib import Path

import pytest

CHECKOUT = Path(__file__).resolve().parents[3]
SPEC = importlib.util.spec_from_file_location("bench_test_steps", str(CHECKOUT / "bench" / "test_steps.py"))
test_steps = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(test_steps)

MAKEFILE = (CHECKOUT / "Makefile").read_text()
MAKE = "make --no-print-directory "
# Two lines as the test target's printf ('    %-22s %-28s %5d s\n') writes them, and one of run_scenarios.py's.
BESIDE_TIMES = ("    units                  passed                         312 s\n"
                "    sanity                 FAILED                         845 s\n"
                "    default                FAILED (exit status 2)         129 s\n")


@pytest.fixture(autouse=True)
def no_make(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("ran %r" % (args,))
    monkeypatch.setattr(subprocess, "run", refuse)


def printed(capsys, argv):
    return [line.split(None, 1) for line in printed_text(capsys, argv).splitlines()]


def printed_text(capsys, argv):
    assert test_steps.main(argv) == 0
    return capsys.readouterr().out


def test_the_dry_run_prints_every_step_of_make_test_alone_in_order(capsys):
    rows = printed(capsys, ["--dry-run"])
    beside = re.search(r"^BESIDE := (.*)$", MAKEFILE, re.M).group(1).split()
    cores = re.search(r"^CORES := (.*)$", MAKEFILE, re.M).group(1).split()
    scenarios = sorted(path.parent.name for path in (CHECKOUT / "molecule").glob("*/molecule.yml"))
    assert [name for name, _command in rows[:3 + len(beside)]] == ["toolchain", "engine", "core-venvs"] + beside
    assert dict(rows[:3]) == {"toolchain": MAKE + "toolchain", "engine": MAKE + "engine",
                              "core-venvs": MAKE + "-j3 core-venvs"}
    assert all(command == MAKE + name for name, command in rows[3:3 + len(beside)])
    molecule = dict(rows[3 + len(beside):])
    assert sorted(molecule) == sorted(["molecule:" + name for name in scenarios]
                                      + ["molecule:default@" + core for core in cores])
    for name in scenarios:
        assert molecule["molecule:" + name] == MAKE + "molecule SCENARIO=" + name
    for core in cores:
        assert molecule["molecule:default@" + core].startswith(MAKE + "'--eval=bench-core-job: ")
        assert molecule["molecule:default@" + core].endswith("' bench-core-job CORE=" + core)


def test_the_jobs_run_in_the_order_of_run_scenarios_lanes(capsys):
    jobs = [name.split(":", 1)[1] for name, _command in printed(capsys, ["--dry-run"]) if name.startswith("molecule:")]
    assert jobs == test_steps.run_scenarios.longest_first(jobs)


def test_another_cores_job_gets_the_core_argument_of_the_molecule_target():
    """The rule run for molecule:default@VERSION names the virtualenv (and image) as `make molecule` does."""
    rule = test_steps.CORE_JOB_RULE.replace("$(CORE)", "$(core)")
    assert "--core " + rule.split(" --core-job ", 1)[1] in MAKEFILE
    assert "$(FIXTURES); $(SCENARIO_IMAGES);" in rule


def test_steps_picks_rows_and_molecule_every_job(capsys):
    assert printed(capsys, ["--dry-run", "--steps", "lint,units,molecule:cuda"]) == [
        ["units", MAKE + "units"], ["lint", MAKE + "lint"], ["molecule:cuda", MAKE + "molecule SCENARIO=cuda"]]
    names = [name for name, _command in printed(capsys, ["--dry-run", "--steps", "molecule"])]
    assert names and all(name.startswith("molecule:") for name in names)
    assert "molecule:default@2.16" in names


def test_an_unknown_step_is_refused(capsys):
    with pytest.raises(SystemExit) as exited:
        test_steps.main(["--dry-run", "--steps", "units,nope"])
    assert exited.value.code == 2
    assert "no such step: nope" in capsys.readouterr().err


def test_from_log_reads_the_seconds_make_test_wrote():
    assert test_steps.parse_times("==> beside molecule, one after another:\n" + BESIDE_TIMES) == [
        ("units", "passed", 312), ("sanity", "FAILED", 845), ("default", "FAILED (exit status 2)", 129)]


def test_from_log_prints_the_table_and_the_total_against_the_goal(tmp_path, capsys):
    log = tmp_path / "beside.times"
    log.write_text(BESIDE_TIMES)
    lines = [line.split() for line in printed_text(capsys, ["--from-log", str(log)]).splitlines()]
    assert ["units", "312", "passed"] in lines
    assert ["sanity", "845", "FAILED"] in lines
    assert ["total", "1286", "2", "of", "3", "failed"] in lines
    assert any(line[:3] == ["They", "took", "1286"] and "107%." in line for line in lines)


def test_from_log_refuses_a_file_without_seconds(tmp_path, capsys):
    log = tmp_path / "beside.times"
    log.write_text("==> units:\n")
    with pytest.raises(SystemExit) as exited:
        test_steps.main(["--from-log", str(log)])
    assert exited.value.code == 2
    assert "holds no line" in capsys.readouterr().err


def test_a_core_job_runs_as_run_scenarios_runs_it(tmp_path, monkeypatch, capsys):
    ran = []

    class Lanes:
        def __init__(self, names, logs, timeout, cores):
            ran.append((names, logs, timeout, cores))

        def job(self, name):
            (tmp_path / (name + ".log")).write_text("==> unit tests on ansible-core 2.21\n")
            return 2

    monkeypatch.setattr(test_steps.run_scenarios, "Lanes", Lanes)
    assert test_steps.core_job("2.21=/venv@image", logs=tmp_path) == 1
    assert ran == [(["default@2.21"], tmp_path, 3600, {"2.21": "/venv@image"})]
    assert capsys.readouterr().out == ("==> unit tests on ansible-core 2.21\n"
                                       "==> default@2.21: FAILED (exit status 2)\n")


def test_each_row_runs_alone_and_the_table_ends_with_the_goal(tmp_path, monkeypatch, capsys):
    ran = []

    def fake_run(argv, stdout, **kwargs):
        ran.append(argv)
        stdout.write("output of %s\n" % argv[-1])
        return subprocess.CompletedProcess(argv, 2 if argv[-1] == "lint" else 0)

    monkeypatch.setattr(subprocess, "run", fake_run)
    monkeypatch.setattr(test_steps, "LOGS", tmp_path)
    assert test_steps.main(["--steps", "units,lint"]) == 1
    assert ran == [["make", "--no-print-directory", "units"], ["make", "--no-print-directory", "lint"]]
    assert (tmp_path / "lint.log").read_text() == "output of lint\n"
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["step", "wall", "s", "cpu", "s", "of", "2,400", "machine", "cpu", "s", "status"]
    assert lines[1].split()[0] == "units" and lines[1].endswith("  passed")
    assert lines[2].endswith("  FAILED (exit status 2): %s" % (tmp_path / "lint.log"))
    assert lines[3].split()[0] == "total" and lines[3].endswith("  1 of 2 failed")
    assert lines[5].startswith("CPU seconds against the goal, 2 cores x 20 minutes = 2,400 CPU seconds: ")
