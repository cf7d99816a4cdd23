"""tests/mutation/parallel.py keeps tests/mutation/scores.txt current: a line per file, replaced by a run that tested
every mutant of the file, with the commit it was measured at; a partial run or one with --only changes nothing."""
import argparse
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

CHECKOUT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(CHECKOUT / "tests" / "mutation"))
import parallel  # noqa: E402

HEADER = "# Mutation scores.\n# One line per file.\n"


def result(file, statuses, total=None):
    mutants = ["id%d" % number for number in range(total or len(statuses))]
    scored = parallel.FileResult(file, ["tests/unit/test_x.py"], mutants)
    scored.results = dict((number, (status, "")) for number, status in enumerate(statuses, start=1))
    return scored


def arguments(scores, only=None, measured_at="abc1234 2026-12-06"):
    return argparse.Namespace(scores=str(scores), only=only, measured_at=measured_at)


def test_the_score_counts_timeouts_as_killed():
    assert result("a.py", ["killed", "timeout", "survived", "killed"]).score() == (
        "75.0% killed (3 of 4, 1 by timeout; 1 survived)")


def test_a_complete_run_replaces_its_files_lines_and_keeps_the_header_and_the_others(tmp_path, monkeypatch):
    scores = tmp_path / "scores.txt"
    scores.write_text(HEADER + "\nplugins/b.py: 90.0% killed (9 of 10) at old 2026-12-01\n"
                      "plugins/c.py: 50.0% killed (1 of 2) at old 2026-12-01\nplugins/gone.py: not measured\n")
    monkeypatch.setattr(parallel, "default_files", lambda root: ["plugins/a.py", "plugins/b.py", "plugins/c.py",
                                                                 "plugins/new.py"])
    parallel.record_complete_scores(arguments(scores), {"plugins/c.py": result("plugins/c.py", ["killed", "killed"]),
                                                        "plugins/a.py": result("plugins/a.py", ["survived"])})
    assert scores.read_text() == HEADER + "\n" + "".join([
        "plugins/a.py: 0.0% killed (0 of 1, 0 by timeout; 1 survived) at abc1234 2026-12-06\n",
        "plugins/b.py: 90.0% killed (9 of 10) at old 2026-12-01\n",
        "plugins/c.py: 100.0% killed (2 of 2, 0 by timeout; 0 survived) at abc1234 2026-12-06\n",
        "plugins/new.py: not measured\n"])


def test_a_partial_run_a_failing_baseline_or_only_some_mutants_record_nothing(tmp_path):
    scores = tmp_path / "scores.txt"
    scores.write_text(HEADER)
    failing = result("plugins/b.py", [])
    failing.problem = "its unit tests fail without a mutant"
    parallel.record_complete_scores(arguments(scores), {"plugins/a.py": result("plugins/a.py", ["killed"], total=2),
                                                        "plugins/b.py": failing})
    parallel.record_complete_scores(arguments(scores, only={1}), {"plugins/c.py": result("plugins/c.py", ["killed"])})
    parallel.record_complete_scores(arguments(""), {"plugins/c.py": result("plugins/c.py", ["killed"])})
    assert scores.read_text() == HEADER


# Mutation testing runs in a git checkout; the Debian 13 image, where the newest core's unit tests run, has no git.
@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_the_commit_measured_at_says_when_the_files_differ_from_it(tmp_path):
    def git(*argv):
        subprocess.run(["git", "-C", str(tmp_path)] + list(argv), check=True, capture_output=True)
    git("init", "-q")
    (tmp_path / "a.py").write_text("A = 1\n")
    git("add", "a.py")
    git("-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "a")
    head = subprocess.run(["git", "-C", str(tmp_path), "log", "-1", "--format=%h %cd", "--date=short"],
                          capture_output=True, text=True, check=True).stdout.strip()
    assert parallel.measured_at(tmp_path, ["a.py"]) == head
    (tmp_path / "a.py").write_text("A = 2\n")
    assert parallel.measured_at(tmp_path, ["a.py"]) == head + " with uncommitted changes"
    assert parallel.measured_at(tmp_path / "nowhere", ["a.py"]) is None
