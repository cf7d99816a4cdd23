"""Start the stand-in as the previous version (ce123ef) of sglang_server did: as root, detached, its log
opened by root, and its state recorded in that version's format (no boot id, no user)."""
import hashlib
import json
import os
import subprocess
import time

ENV = {"SGLANG_STANDIN_STEP": "0.02"}
ARGV = ["/opt/ml-env/bin/python", "-m", "sglang.launch_server", "--model-path", "/srv/models/tiny",
        "--tensor-parallel-size", "1", "--host", "127.0.0.1", "--port", "28220"]
STATE_DIR = "/var/lib/blackwell-gpu-node"

os.makedirs("/var/log/sglang", exist_ok=True)
with open("/var/log/sglang/sglang.log", "ab") as log:
    offset = log.seek(0, os.SEEK_END)
    process = subprocess.Popen(ARGV, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                               env=dict(os.environ, **ENV), start_new_session=True, close_fds=True)
while True:
    with open("/proc/%d/stat" % process.pid) as handle:
        start_time = int(handle.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/%d/cmdline" % process.pid, "rb") as handle:
        if handle.read().split(b"\0")[:-1] == [word.encode() for word in ARGV]:
            break
    time.sleep(0.01)
os.makedirs(STATE_DIR, 0o750, exist_ok=True)
state = {"argv": ARGV, "env_digest": hashlib.sha256(json.dumps(ENV, sort_keys=True).encode()).hexdigest(),
         "log_path": "/var/log/sglang/sglang.log", "manager": "module", "started_at": time.time(),
         "pid": process.pid, "offset": offset, "start_time": start_time}
with open(os.path.join(STATE_DIR, "sglang.json"), "w") as handle:
    json.dump(state, handle, indent=2, sort_keys=True)
with open(os.path.join(STATE_DIR, "sglang.pid"), "w") as handle:
    handle.write("%d\n" % process.pid)
with open("/root/legacy-server.pid", "w") as handle:
    handle.write("%d\n" % process.pid)
print(process.pid)
