"""The diagnosis rates on the real-log corpora: the tuned one (tests/data/sglang_logs, which the catalogue was
written against) and the held-out one (tests/data/sglang_logs/held_out, collected before the catalogue's patterns
were written and never used to change them), each on its own; and on the failures of a release built from its
source (tests/data/sglang_logs/built, until logs of a real run replace them), apart from both.

    make bench-diagnoses        (or .venv/bin/python bench/diagnosis_rate.py)

Each log is replayed whole through wait_for_server's core, the way tests/unit/test_real_logs.py does (a failure
log's process is gone at its end). One line a log: the verdict, the diagnosis id, the component and the cause
line; then, per corpus, the logs, how many were called ready or failed right, diagnosed by a catalogue entry,
given only the generic diagnosis, given no component (must be 0), and successes called failed (must be 0).
Exits 1 when a failure has no component or a success is called failed.
"""

import sys
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(CHECKOUT / ".build" / "collections"))

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.log_follower import LogFollower  # noqa: E402
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.readiness import Waiter  # noqa: E402
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.log import StartupClassifier  # noqa: E402

LOGS = CHECKOUT / "tests" / "data" / "sglang_logs"
CORPORA = (("tuned", LOGS), ("held-out", LOGS / "held_out"), ("built", LOGS / "built"))
GENERIC = "not_in_catalogue"


def replay(path):
    is_failure = path.name.startswith("failure-")
    waiter = Waiter(LogFollower(str(path)), StartupClassifier(), timeout=0, poll_interval=0,
                    pid=1 if is_failure else None, is_running=lambda pid: False, sleep=lambda seconds: None)
    return waiter.run()


def rates(logs):
    counts = dict(logs=0, right=0, failures=0, catalogue=0, generic=0, no_component=0, false_alarms=0)
    for path in logs:
        result = replay(path)
        failure = result["failure"] or {}
        diagnosis = failure.get("diagnosis") or {}
        is_failure = path.name.startswith("failure-")
        counts["logs"] += 1
        counts["right"] += result["ready"] is not is_failure
        if is_failure:
            counts["failures"] += 1
            counts["catalogue"] += diagnosis.get("id") not in (None, GENERIC)
            counts["generic"] += diagnosis.get("id") == GENERIC
            counts["no_component"] += not diagnosis.get("component")
        else:
            counts["false_alarms"] += not result["ready"]
        print("  %-66s %-7s %-28s %-30s %s" % (
            path.name, "ready" if result["ready"] else "failed", diagnosis.get("id", "-"),
            (diagnosis.get("component") or "-")[:30], (failure.get("cause") or "")[:70]))
    return counts


def main():
    problems = 0
    summaries = []
    for name, folder in CORPORA:
        print("%s corpus (%s):" % (name, folder.relative_to(CHECKOUT)))
        counts = rates(sorted(folder.glob("*.log")))
        summaries.append(
            "%-9s logs %3d | ready/failed right %3d/%d | failures %3d: by a catalogue entry %3d (%3.0f%%), generic "
            "only %3d, no component %d | successes called failed %d" % (
                name, counts["logs"], counts["right"], counts["logs"], counts["failures"], counts["catalogue"],
                100.0 * counts["catalogue"] / max(counts["failures"], 1), counts["generic"], counts["no_component"],
                counts["false_alarms"]))
        problems += counts["no_component"] + counts["false_alarms"]
    print("")
    print("\n".join(summaries))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
