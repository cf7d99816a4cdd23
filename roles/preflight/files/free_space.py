"""Free space for a virtualenv that may not exist yet: that of the filesystem its nearest existing ancestor is on.

Prints {"venv_exists", "directory", "mount", "free_bytes"} as JSON. Run by the preflight role with the host's Python.
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
print(json.dumps({"venv_exists": os.path.isfile(os.path.join(venv, "pyvenv.cfg")), "directory": directory,
                  "mount": mount, "free_bytes": filesystem.f_bavail * filesystem.f_frsize}))
