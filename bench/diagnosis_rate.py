"""The diagnosis rate on the real-log corpus: how many failed start-ups get a diagnosis,
and how many successful ones are called failed.

    .venv/bin/python bench/diagnosis_rate.py

Each log of tests/data/sglang_logs is replayed whole through wait_for_server's core, the
way tests/unit/test_real_logs.py does (a failure log's process is gone at its end), and
the verdict, cause line and diagnosis id are printed, one log a line.
"""

import sys
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(CHECKOUT / ".build" / "collections"))

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.log_follower import LogFollower  # noqa: E402
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.readiness import Waiter  # noqa: E402
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.log import StartupClassifier  # noqa: E402

LOGS = CHECKOUT / "tests" / "data" / "sglang_logs"


def replay(path):
    is_failure = path.name.startswith("failure-")
    waiter = Waiter(LogFollower(str(path)), StartupClassifier(), timeout=0, poll_interval=0,
                    pid=1 if is_failure else None, is_running=lambda pid: False, sleep=lambda seconds: None)
    return waiter.run()


def main():
    failures = diagnosed = successes = false_alarms = 0
    print("%-62s %-8s %-26s %s" % ("log", "verdict", "diagnosis", "cause line"))
    for path in sorted(LOGS.glob("*.log")):
        result = replay(path)
        failure = result["failure"] or {}
        diagnosis = (failure.get("diagnosis") or {}).get("id")
        if path.name.startswith("failure-"):
            failures += 1
            diagnosed += diagnosis is not None
        else:
            successes += 1
            false_alarms += not result["ready"]
        print("%-62s %-8s %-26s %s" % (path.name, "ready" if result["ready"] else "failed", diagnosis or "-",
                                       (failure.get("cause") or "")[:100]))
    print("\nfailures with a diagnosis: %d/%d (%.0f%%)" % (diagnosed, failures, 100.0 * diagnosed / max(failures, 1)))
    print("successful start-ups called failed: %d/%d" % (false_alarms, successes))
    return 0 if failures and diagnosed * 10 >= failures * 9 and not false_alarms else 1


if __name__ == "__main__":
    sys.exit(main())
