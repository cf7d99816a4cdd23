"""Start SGLang's model gateway (sglang-router 0.3.2, or smg 1.13.0) with its keys kept off the command line, and
register the workers of a workers file once it listens: the gateway keeps its workers in memory only, and a start
without them would route nothing.

    python gateway_launch.py --secrets FILE --workers FILE [--gateway-module MODULE] -- ROUTER_ARGUMENTS...

MODULE: the gateway's Python module with launch_router() and parse_router_args(), sglang_router.launch_router
(the default, which a unit written before this option runs) or smg.launch_router.

Shipped by blackwell.gpu_node's gateway role and run as the gateway's user. FILE (secrets): JSON with
`admin_key` (becomes --control-plane-api-keys, role admin) and `api_key` (--api-key, null: clients need none).
FILE (workers): JSON, {"workers": [POST /workers bodies], "out": [URLs], "package": ...}, written by the
gateway_workers module (the package is that module's to read); the workers whose URL is out (taken out for a
drain) are not registered, and a missing file registers none (the role registers the fleet through the API once
the gateway runs). Both are read here, in the process, and the keys given to the gateway's own argument parser:
neither key is ever on a command line.
"""
import argparse
import importlib
import json
import os
import stat
import sys
import time
import urllib.error
import urllib.request

# Files this launcher reads are small; a larger one is not ours.
FILE_LIMIT = 1 << 20
# How long the gateway may take to listen before the workers are given up for this start.
LISTEN_TIMEOUT = 120.0
REQUEST_TIMEOUT = 10.0


def read_json(path):
    """The JSON of a regular file, never through a link, at most FILE_LIMIT bytes."""
    descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(descriptor, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise ValueError("%s is not a regular file" % path)
        data = handle.read(FILE_LIMIT + 1)
    if len(data) > FILE_LIMIT:
        raise ValueError("%s is larger than %d bytes" % (path, FILE_LIMIT))
    return json.loads(data.decode("utf-8"))


def registered_at_start(path):
    """The POST /workers bodies of the workers file at path that are not out; none when there is no file."""
    try:
        found = read_json(path)
    except FileNotFoundError:
        log("%s does not exist: no worker is registered at start" % path)
        return []
    if not isinstance(found, dict) or not isinstance(found.get("workers"), list):
        raise SystemExit("gateway_launch: %s does not hold {workers: [...], out: [...]}" % path)
    out = set(found.get("out") or ())
    for worker in found["workers"]:
        if worker.get("url") in out:
            log("%s is out (drained): not registered" % worker.get("url"))
    return [worker for worker in found["workers"] if worker.get("url") not in out]


def log(message):
    sys.stderr.write("gateway_launch: %s\n" % message)
    sys.stderr.flush()


def request(url, admin_key=None, document=None):
    headers = {"Content-Type": "application/json"}
    if admin_key:
        headers["Authorization"] = "Bearer " + admin_key
    data = None if document is None else json.dumps(document).encode("utf-8")
    call = urllib.request.Request(url, data=data, headers=headers, method="GET" if data is None else "POST")
    with urllib.request.urlopen(call, timeout=REQUEST_TIMEOUT) as answer:  # nosec: the gateway's own address
        return answer.status, answer.read(FILE_LIMIT)


def register(base_url, admin_key, workers):
    """Once the gateway answers /liveness (within LISTEN_TIMEOUT), POST each worker; the gateway registers them
    in the background, each once its /health answers."""
    deadline = time.monotonic() + LISTEN_TIMEOUT
    while True:
        try:
            if request(base_url + "/liveness")[0] == 200:
                break
        except (OSError, urllib.error.URLError):
            pass
        if time.monotonic() >= deadline:
            log("the gateway did not listen at %s within %d s; no worker was registered" % (base_url, LISTEN_TIMEOUT))
            return
        time.sleep(0.2)
    for worker in workers:
        try:
            status = request(base_url + "/workers", admin_key, worker)[0]
            log("registering %s: HTTP %d" % (worker.get("url"), status))
        except (OSError, urllib.error.URLError) as exc:
            log("registering %s failed: %s" % (worker.get("url"), exc))


def value_of(arguments, flag, default):
    """The value of --flag in the gateway's arguments (the last one, as argparse takes it)."""
    found = default
    for index, word in enumerate(arguments):
        if word == flag and index + 1 < len(arguments):
            found = arguments[index + 1]
        elif word.startswith(flag + "="):
            found = word[len(flag) + 1:]
    return found


def main(argv=None):
    parser = argparse.ArgumentParser(prog="gateway_launch")
    parser.add_argument("--secrets", required=True)
    parser.add_argument("--workers", required=True)
    parser.add_argument("--gateway-module", default="sglang_router.launch_router")
    parser.add_argument("router", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    router = args.router[1:] if args.router[:1] == ["--"] else args.router
    secrets = read_json(args.secrets)
    workers = registered_at_start(args.workers)
    router += ["--control-plane-api-keys", "blackwell-gpu-node:ansible:admin:" + secrets["admin_key"]]
    if secrets.get("api_key"):
        router += ["--api-key", secrets["api_key"]]
    host = value_of(router, "--host", "0.0.0.0")
    host = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
    base_url = "http://%s:%s" % ("[%s]" % host if ":" in host else host, value_of(router, "--port", "30000"))
    # Imported only now: a bad secrets or workers file is refused before the gateway's heavy import.
    gateway = importlib.import_module(args.gateway_module)
    router_args = gateway.parse_router_args(router)
    # A child process, not a thread: the gateway holds Python's GIL while it serves, so no thread of this process
    # would run. Forked before the gateway starts any thread of its own; it ends once the workers are posted.
    if os.fork() == 0:
        try:
            register(base_url, secrets["admin_key"], workers)
        finally:
            os._exit(0)
    gateway.launch_router(router_args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
