"""A client of the model gateway, on the controller: a POST /generate every INTERVAL seconds, one at a time, until
the stop file appears (or --max-seconds pass), one JSON line per request in LOG: sent and done (epoch seconds),
status (0: no answer), the port of the stand-in that answered (its meta_info.standin_port), error. Beside it, the
gateway's workers as GET /workers (admin key) lists them, a line each time their health changes:
{"workers_at": t, "healthy": {url: bool}}. Standard library only; every request has a timeout."""
import argparse
import json
import os
import threading
import time
import urllib.error
import urllib.request


def request(url, body=None, key=None, timeout=30.0):
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = "Bearer " + key
    data = None if body is None else json.dumps(body).encode()
    with urllib.request.urlopen(urllib.request.Request(url, data=data, headers=headers), timeout=timeout) as answer:
        return answer.status, json.loads(answer.read(1 << 20) or b"null")


def generate(url, index):
    sent = time.time()
    line = {"sent": sent, "status": 0, "port": None, "error": None}
    try:
        status, answer = request(url + "/generate", {"text": "request %d" % index,
                                                     "sampling_params": {"max_new_tokens": 2}})
        line.update(status=status, port=(answer.get("meta_info") or {}).get("standin_port"))
    except urllib.error.HTTPError as exc:
        line.update(status=exc.code, error=exc.read(2000).decode("utf-8", "replace"))
    except (OSError, ValueError) as exc:
        line.update(error="%s: %s" % (type(exc).__name__, exc))
    line["done"] = time.time()
    return line


def watch_workers(url, key, log, lock, stopped):
    """Log the gateway's view of its workers' health each time it changes."""
    last = None
    while not stopped.is_set():
        try:
            _status, answer = request(url + "/workers", key=key, timeout=5.0)
            healthy = dict((worker["url"], worker["is_healthy"]) for worker in answer["workers"])
        except (OSError, ValueError, KeyError, TypeError):
            healthy = None
        if healthy is not None and healthy != last:
            with lock:
                log.write(json.dumps({"workers_at": time.time(), "healthy": healthy}) + "\n")
                log.flush()
            last = healthy
        stopped.wait(0.2)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--admin-key-file", required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--stop-file", required=True)
    parser.add_argument("--interval", type=float, default=0.05)
    parser.add_argument("--max-seconds", type=float, default=1200)
    args = parser.parse_args()
    with open(args.admin_key_file) as key_file:
        key = key_file.read().strip()
    lock, stopped = threading.Lock(), threading.Event()
    deadline = time.monotonic() + args.max_seconds
    with open(args.log, "a") as log:
        watcher = threading.Thread(target=watch_workers, args=(args.url, key, log, lock, stopped), daemon=True)
        watcher.start()
        index = 0
        while not os.path.exists(args.stop_file) and time.monotonic() < deadline:
            line = generate(args.url, index)
            with lock:
                log.write(json.dumps(line) + "\n")
                log.flush()
            index += 1
            time.sleep(max(args.interval - (line["done"] - line["sent"]), 0))
        stopped.set()
        watcher.join(10)


if __name__ == "__main__":
    main()
