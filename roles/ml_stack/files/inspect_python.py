# Run by the ml_stack role with ml_stack_python before it changes anything; prints one JSON object: the
# interpreter's version and platform (for the profile's minimum Python and the controller's downloads),
# and whether it can create virtualenvs.
import json
import os
import platform
import sys

try:
    import ensurepip  # noqa: F401  Debian and Ubuntu ship it only with python3-venv.
    import venv  # noqa: F401

    venv_error = None
except ImportError as exc:
    venv_error = str(exc)

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
