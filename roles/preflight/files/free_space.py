"""Free space for a virtualenv that may not exist yet: that of the filesystem its nearest existing ancestor is on,
and the names beside the stable path (where ml_stack keeps one virtualenv per profile: <name>.<profile>-<digest>).

Prints {"siblings", "directory", "mount", "free_bytes"} as JSON. Run by the preflight role with the host's Python.
"""
import json
import os
import sys

venv = os.path.abspath(sys.argv[1])
directory = venv
while not os.path.exists(directory):
    directory = os.path.dirname(directory)
mount = directory
while not os.path.ismount(mount):
    mount = os.path.dirname(mount)
filesystem = os.statvfs(directory)
parent, prefix = os.path.dirname(venv), os.path.basename(venv) + "."
siblings = sorted(name for name in os.listdir(parent) if name.startswith(prefix)) if os.path.isdir(parent) else []
print(json.dumps({"siblings": siblings, "directory": directory, "mount": mount,
                  "free_bytes": filesystem.f_bavail * filesystem.f_frsize}))
