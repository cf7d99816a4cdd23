# Run by the ml_stack role with ml_stack_python before it changes anything; prints one JSON object: the
# interpreter's version and platform (for the profile's minimum Python and the controller's downloads),
# and whether it can create virtualenvs.
import importlib.util
import json
import os
import platform
import sys

# Debian and Ubuntu ship ensurepip only with python3-venv.
missing = [name for name in ("ensurepip", "venv") if importlib.util.find_spec(name) is None]
venv_error = "No module named %s" % " or ".join(repr(name) for name in missing) if missing else None

try:
    glibc = os.confstr("CS_GNU_LIBC_VERSION").split()[-1]
except (AttributeError, ValueError, OSError):
    glibc = None

print(json.dumps({
    "executable": sys.executable,
    "version": platform.python_version(),
    "implementation": sys.implementation.name,
    "machine": platform.machine(),
    "glibc": glibc,
    "venv_error": venv_error,
}))
