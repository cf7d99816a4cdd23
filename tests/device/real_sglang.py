"""The decisions of the real-SGLang device run (tests/device/README.md), apart from the shell that moves files.

Here: which wheels of a stack lock the GPU host needs when it adopts its own torch (``plan``), their download by
the lock's URL and sha256 (``download``), and their packing into numbered batches that each fit one device call
(``pack``). There, on the GPU host: ``receive`` (one batch per call; the wheelhouse reassembled and checked once
every batch is there), ``step-result`` (what a step's playbook did, wait_for_server's seconds from its -v output)
and ``summary`` (the table of what the run kept).
"""

import argparse
import hashlib
import importlib.util
import json
import os
import re
import shutil
import sys
import time
import urllib.request

MIB = 1 << 20
MANIFEST = "manifest.json"
COMPLETE = "complete.json"
CHUNK = 1 << 20


def sha256_of(path):
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for block in iter(lambda: stream.read(CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def stack_lock():
    """The collection's lock module (plugins/module_utils/_stack/lock.py, standard library only), loaded from this
    checkout: the host adopts its torch by the same closure the ml_stack role leaves out."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "plugins", "module_utils", "_stack",
                        "lock.py")
    spec = importlib.util.spec_from_file_location("stack_lock", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def plan(lock, environment, root="torch"):
    """(the wheels to carry: [{name, file, url, sha256}], the distributions the host's own root stands for: root
    and what only root's closure requires)."""
    module = stack_lock()
    if environment not in lock["environments"]:
        raise SystemExit("the lock of %s has no environment %s; it has %s"
                         % (lock["profile"], environment, ", ".join(lock["environments"])))
    left = module.closure(lock, root, environment)
    if not left:
        raise SystemExit("the lock of %s installs no %s in %s" % (lock["profile"], root, environment))
    wheels = [{"name": wheel["distribution"], "file": wheel["wheel"], "url": wheel["url"], "sha256": wheel["sha256"]}
              for wheel in module.wheels_for(lock, environment) if wheel["distribution"] not in left]
    return wheels, left


def fetch(url, target, sha256, opener=urllib.request.urlopen, attempts=3):
    """url into target, which must have sha256; a partial file never takes target's name."""
    partial = target + ".download"
    for attempt in range(1, attempts + 1):
        try:
            with opener(url, timeout=60) as answer, open(partial, "wb") as stream:
                shutil.copyfileobj(answer, stream, CHUNK)
        except OSError as error:
            if attempt == attempts:
                raise SystemExit("%s: download from %s failed %d times: %s"
                                 % (os.path.basename(target), url, attempts, error))
            time.sleep(2 * attempt)
            continue
        got = sha256_of(partial)
        if got == sha256:
            os.replace(partial, target)
            return
        os.remove(partial)
        raise SystemExit("%s: the file at %s has sha256 %s, the lock says %s"
                         % (os.path.basename(target), url, got, sha256))


def download(wheels, folder, opener=urllib.request.urlopen):
    """Every wheel into folder, by its URL, checked against its sha256; one already there and right is kept."""
    os.makedirs(folder, exist_ok=True)
    for wheel in wheels:
        target = os.path.join(folder, wheel["file"])
        if os.path.exists(target) and sha256_of(target) == wheel["sha256"]:
            continue
        print("downloading %s" % wheel["file"], flush=True)
        fetch(wheel["url"], target, wheel["sha256"], opener)


def pack(files, out, limit):
    """Split every file larger than limit bytes into .partNN pieces and pack all pieces into batch-NN folders of
    at most limit bytes each (largest first, each into the first batch it fits). files: [{path, dest, sha256}],
    dest the folder the host puts the file in, which a piece's name begins with (dest/file.whl.part01: the same
    wheel can go to two folders). Each batch gets the manifest: every file, its sha256, its pieces and the batch
    of each."""
    for old in os.listdir(out) if os.path.isdir(out) else []:
        if re.match(r"batch-\d+$", old):
            shutil.rmtree(os.path.join(out, old))
    pieces = []
    entries = []
    for spec in sorted(files, key=lambda spec: os.path.basename(spec["path"])):
        name = os.path.basename(spec["path"])
        size = os.path.getsize(spec["path"])
        count = max(1, -(-size // limit))
        parts = []
        for index in range(count):
            part = {"name": "%s/%s" % (spec["dest"], name if count == 1 else "%s.part%02d" % (name, index + 1)),
                    "size": min(limit, size - index * limit)}
            parts.append(part)
            pieces.append((part, spec["path"], index * limit, count == 1))
        entries.append({"name": name, "dest": spec["dest"], "sha256": spec["sha256"], "size": size, "parts": parts})
    loads = []
    for part in sorted((piece[0] for piece in pieces), key=lambda part: (-part["size"], part["name"])):
        batch = next((index for index, load in enumerate(loads) if load + part["size"] <= limit), None)
        if batch is None:
            loads.append(0)
            batch = len(loads) - 1
        loads[batch] += part["size"]
        part["batch"] = batch + 1
    manifest = {"batches": len(loads), "bytes": sum(entry["size"] for entry in entries), "files": entries}
    for number in range(1, len(loads) + 1):
        os.makedirs(os.path.join(out, "batch-%02d" % number))
    for part, source, offset, whole in pieces:
        target = os.path.join(out, "batch-%02d" % part["batch"], part["name"])
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if whole:
            try:
                os.link(source, target)
            except OSError:
                shutil.copyfile(source, target)
            continue
        with open(source, "rb") as reader, open(target, "wb") as writer:
            reader.seek(offset)
            left = part["size"]
            while left:
                block = reader.read(min(CHUNK, left))
                writer.write(block)
                left -= len(block)
    text = json.dumps(manifest, indent=1, sort_keys=True) + "\n"
    for number in range(1, len(loads) + 1):
        with open(os.path.join(out, "batch-%02d" % number, MANIFEST), "w") as stream:
            stream.write(text)
    with open(os.path.join(out, MANIFEST), "w") as stream:
        stream.write(text)
    return manifest, loads


def read_json(path):
    with open(path) as stream:
        return json.load(stream)


def receive(batch, staging, destinations):
    """Move batch's pieces into staging; once every batch of the manifest has come, put each file together into
    its destination folder (destinations: {dest: folder}) and check its sha256. Returns (batches here, batches
    in all, files put together or None while batches are missing)."""
    manifest = read_json(os.path.join(batch, MANIFEST))
    os.makedirs(staging, exist_ok=True)
    kept = os.path.join(staging, MANIFEST)
    if os.path.exists(kept) and read_json(kept) != manifest:
        raise SystemExit("%s belongs to another wheelhouse than the batches in %s: start again with batch 1 "
                         "(rm -rf %s)" % (batch, staging, staging))
    if os.path.exists(kept) and os.path.exists(os.path.join(staging, COMPLETE)):
        return list(range(1, manifest["batches"] + 1)), manifest["batches"], read_json(os.path.join(staging, COMPLETE))
    shutil.copyfile(os.path.join(batch, MANIFEST), kept)
    parts = [part for entry in manifest["files"] for part in entry["parts"]]
    for part in parts:
        if os.path.exists(os.path.join(batch, part["name"])):
            os.makedirs(os.path.dirname(os.path.join(staging, part["name"])), exist_ok=True)
            shutil.move(os.path.join(batch, part["name"]), os.path.join(staging, part["name"]))
    here = sorted(set(part["batch"] for part in parts)
                  - set(part["batch"] for part in parts
                        if not os.path.exists(os.path.join(staging, part["name"]))))
    if len(here) < manifest["batches"]:
        return here, manifest["batches"], None
    # Readable by all: ml_stack's pip runs as the service user.
    for folder in destinations.values():
        os.makedirs(folder, exist_ok=True)
        os.chmod(folder, 0o755)
    for entry in manifest["files"]:
        target = os.path.join(destinations[entry["dest"]], entry["name"])
        with open(target + ".joining", "wb") as writer:
            for part in entry["parts"]:
                with open(os.path.join(staging, part["name"]), "rb") as reader:
                    shutil.copyfileobj(reader, writer, CHUNK)
        got = sha256_of(target + ".joining")
        if got != entry["sha256"]:
            os.remove(target + ".joining")
            raise SystemExit("%s: put together from %d piece(s) it has sha256 %s, the manifest says %s: send its "
                             "batches (%s) again" % (entry["name"], len(entry["parts"]), got, entry["sha256"],
                                                     ", ".join(str(part["batch"]) for part in entry["parts"])))
        os.replace(target + ".joining", target)
        os.chmod(target, 0o644)
    for part in parts:
        os.remove(os.path.join(staging, part["name"]))
    for folder in set(os.path.dirname(part["name"]) for part in parts):
        os.rmdir(os.path.join(staging, folder))
    complete = {"files": len(manifest["files"]), "bytes": manifest["bytes"], "batches": manifest["batches"],
                "folders": destinations}
    with open(os.path.join(staging, COMPLETE), "w") as stream:
        json.dump(complete, stream, indent=1, sort_keys=True)
    return here, manifest["batches"], complete


def wait_elapsed(log, task="Wait until the server is ready"):
    """The result of the last run of the task named task in ansible-playbook -v output (default callback, JSON
    on one line), or None."""
    found, heading = None, False
    with open(log, errors="replace") as stream:
        for line in stream:
            title = re.match(r"TASK \[(?:[^\]]+? : )?(.*)\] \**$", line.rstrip("\n"))
            if title:
                heading = title.group(1) == task
            elif heading and re.match(r"(ok|changed|fatal): \[[^\]]+\]( FAILED!)? => \{.*\}$", line.rstrip("\n")):
                found = json.loads(line.split(" => ", 1)[1])
                heading = False
    return found


def step_result(log, attempt, report=None):
    """What one step of record_real_sglang.sh kept: its playbook's exit status and seconds (the last "[exit N after
    S s]" line of log), wait_for_server's seconds where it saw the server ready, and with report (the diagnose
    playbook's JSON) the verdict and the generated text."""
    with open(log, errors="replace") as stream:
        ends = re.findall(r"^\[exit (\d+) after (\d+) s\]$", stream.read(), re.M)
    kept = {"exit": int(ends[-1][0]) if ends else None, "seconds": float(ends[-1][1]) if ends else None,
            "attempt": attempt}
    waited = wait_elapsed(log)
    kept["ready"] = waited.get("elapsed") if waited and waited.get("ready") else None
    if report:
        diagnosis = next(iter(read_json(report).values()))["diagnosis"]
        generate = (diagnosis.get("serving") or {}).get("generate") or {}
        kept.update(verdict=diagnosis.get("verdict"), text=generate.get("text"), tokens=generate.get("tokens"))
    return kept


def ranges(numbers):
    """[1, 2, 3, 5] -> '1-3, 5'."""
    spans = []
    for number in numbers:
        if spans and spans[-1][1] == number - 1:
            spans[-1][1] = number
        else:
            spans.append([number, number])
    return ", ".join(str(low) if low == high else "%d-%d" % (low, high) for low, high in spans)


def seconds(value):
    return "-" if value is None else "%.1f s" % value


def one_line(text, width=240):
    text = " ".join(str(text or "").split())
    return text if len(text) <= width else text[:width - 3] + "..."


def failure_row(result):
    """(case, what happened, the diagnosis, seconds) of one failure case's result."""
    launch, ready, diagnosis = result.get("launch") or {}, result.get("ready") or {}, result.get("diagnosis") or {}
    if launch.get("failed"):
        return result["case"], "refused by sglang_server before launch", one_line(launch.get("msg")), None
    if ready.get("ready"):
        return result["case"], "READY (no failure)", one_line(diagnosis.get("verdict")), ready.get("elapsed")
    found = (ready.get("failure") or {}).get("diagnosis") or {}
    said = "[%s] %s: %s" % (found.get("id"), found.get("component"), found.get("cause")) if found else \
        one_line(ready.get("msg"))
    return (result["case"], one_line((ready.get("failure") or {}).get("cause"), 160) or "failed",
            one_line(said + " | diagnose: " + str(diagnosis.get("verdict"))), ready.get("elapsed"))


def summary(state):
    """The run's table from what its stages kept in state/results."""
    results = os.path.join(state, "results")

    def result(name):
        path = os.path.join(results, name + ".json")
        return read_json(path) if os.path.exists(path) else None
    lines = ["Real SGLang on a lent GPU host (tests/device/record_real_sglang.sh)", ""]
    for name, label in (("install", "site without the server (ml_stack from the wheelhouse, torch adopted)"),
                        ("cold", "site, first start of the server (cold)"), ("validate", "validate (real generate)"),
                        ("diagnose", "diagnose"), ("stop", "stop"), ("warm", "serve, second start (warm)"),
                        ("stop_warm", "stop")):
        kept = result(name)
        if kept is None:
            lines.append("%-72s not run" % label)
            continue
        ready = " ready after %s" % seconds(kept["ready"]) if kept.get("ready") is not None else ""
        lines.append("%-72s exit %s after %s%s" % (label, kept["exit"], seconds(kept["seconds"]), ready))
    kept = result("diagnose")
    if kept:
        lines += ["", "generate (diagnose's probe, as validate's): %r (%s tokens)" % (kept.get("text"), kept.get("tokens")),
                  "diagnose verdict: %s" % one_line(kept.get("verdict"))]
    cases = sorted(name[len("failure-"):-len(".json")] for name in os.listdir(results)
                   if name.startswith("failure-")) if os.path.isdir(results) else []
    lines += ["", "Failures, each started by sglang_server and diagnosed (seconds: launch to diagnosis, wait_for_server):"]
    for case in cases:
        name, what, said, took = failure_row(result("failure-" + case))
        lines.append("- %s: %s after %s" % (name, what, seconds(took)))
        lines.append("  diagnosis: %s" % said)
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    command = commands.add_parser("plan", help="the wheels to carry, as JSON, and the distributions left to the host")
    command.add_argument("lock")
    command.add_argument("environment")
    command = commands.add_parser("download", help="download the planned wheels (plan's JSON on stdin)")
    command.add_argument("folder")
    command = commands.add_parser("pack", help="split and batch the files (JSON list of {path, dest, sha256} on stdin)")
    command.add_argument("out")
    command.add_argument("limit", type=int, help="bytes per batch")
    command = commands.add_parser("receive", help="take one batch; put the wheelhouse together once all are here")
    command.add_argument("batch")
    command.add_argument("staging")
    command.add_argument("destination", nargs="+", help="DEST=FOLDER")
    command = commands.add_parser("step-result", help="what a step of record_real_sglang.sh kept, as JSON")
    command.add_argument("log")
    command.add_argument("attempt", type=int)
    command.add_argument("report", nargs="?")
    command = commands.add_parser("summary", help="the run's table")
    command.add_argument("state")
    args = parser.parse_args(argv)
    if args.command == "plan":
        wheels, left = plan(read_json(args.lock), args.environment)
        json.dump({"wheels": wheels, "adopted": left}, sys.stdout, indent=1)
        print()
    elif args.command == "download":
        download(json.load(sys.stdin)["wheels"], args.folder)
    elif args.command == "pack":
        manifest, loads = pack(json.load(sys.stdin), args.out, args.limit)
        for number, load in enumerate(loads, 1):
            files = sorted(part["name"] for entry in manifest["files"] for part in entry["parts"]
                           if part["batch"] == number)
            print("batch-%02d  %6.1f MiB  %s" % (number, load / MIB, " ".join(files)))
        print("%d files, %.1f MiB in %d batches of at most %.1f MiB"
              % (len(manifest["files"]), manifest["bytes"] / MIB, len(loads), args.limit / MIB))
    elif args.command == "receive":
        destinations = dict(item.split("=", 1) for item in args.destination)
        here, total, complete = receive(args.batch, args.staging, destinations)
        missing = sorted(set(range(1, total + 1)) - set(here))
        if complete is None:
            print("batches here: %s of %d; missing: %s" % (ranges(here), total, ranges(missing)))
        else:
            print("all %d batches here: %d files, %.1f MiB, every sha256 as the manifest says, in %s"
                  % (total, complete["files"], complete["bytes"] / MIB,
                     ", ".join("%s (%s)" % (folder, dest) for dest, folder in sorted(destinations.items()))))
    elif args.command == "step-result":
        json.dump(step_result(args.log, args.attempt, args.report), sys.stdout, indent=1)
        print()
    else:
        sys.stdout.write(summary(args.state))
    return 0


if __name__ == "__main__":
    sys.exit(main())
