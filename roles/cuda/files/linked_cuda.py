"""What the dynamic linker resolves for CUDA's runtime and NVRTC, and what they report when loaded.

Usage: python3 linked_cuda.py MAJOR. Prints JSON: "cache" maps each libcudart/libnvrtc soname that
`ldconfig -p` lists to the real paths it resolves to; "cudart_version" and "nvrtc_version" are what
cudaRuntimeGetVersion and nvrtcVersion return for libcudart.so.MAJOR and libnvrtc.so.MAJOR (or the
load error). Run by the cuda role with the host's Python.
"""
import ctypes
import json
import os
import re
import subprocess
import sys

major = sys.argv[1]
ldconfig = next((path for path in ("/sbin/ldconfig", "/usr/sbin/ldconfig") if os.path.exists(path)), "ldconfig")
listing = subprocess.check_output([ldconfig, "-p"]).decode("utf-8", "replace")
cache = {}
for match in re.finditer(r"^\s*(lib(?:cudart|nvrtc)\.so(?:\.\d+)*) \([^)]*\) => (\S+)$", listing, flags=re.M):
    cache.setdefault(match.group(1), []).append(os.path.realpath(match.group(2)))

report = {"cache": cache}
try:
    cudart = ctypes.CDLL("libcudart.so." + major)
    version = ctypes.c_int()
    cudart.cudaRuntimeGetVersion(ctypes.byref(version))
    report["cudart_version"] = "%d.%d" % (version.value // 1000, version.value % 1000 // 10)
except OSError as error:
    report["cudart_version"] = "not loaded: %s" % error
try:
    nvrtc = ctypes.CDLL("libnvrtc.so." + major)
    nvrtc_major, nvrtc_minor = ctypes.c_int(), ctypes.c_int()
    nvrtc.nvrtcVersion(ctypes.byref(nvrtc_major), ctypes.byref(nvrtc_minor))
    report["nvrtc_version"] = "%d.%d" % (nvrtc_major.value, nvrtc_minor.value)
except OSError as error:
    report["nvrtc_version"] = "not loaded: %s" % error
print(json.dumps(report, sort_keys=True))
