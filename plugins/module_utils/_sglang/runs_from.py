# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Private to the blackwell.gpu_node collection: not a public API, it may change in any release.
"""What a server runs from in its virtualenv: the stack's packages and the rendered environment."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

import fnmatch
import hashlib
import json
import os

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.errors import InvalidOption

# What the server runs from in its virtualenv: the stack's packages (their versions are in the dist-info names)
# and the runtime environment the runtime_env role renders. BLACKWELL_GPU_NODE_RUNS_FROM carries their digest
# in the server's environment, so a change there restarts the server.
RUNS_FROM_PATTERNS = ("torch-*.dist-info", "sglang-*.dist-info", "sgl_kernel-*.dist-info",
                      "flashinfer_python-*.dist-info", "flashinfer_jit_cache-*.dist-info", "_blackwell_gpu_node_env.py")


RUNS_FROM_VARIABLE = "BLACKWELL_GPU_NODE_RUNS_FROM"


# lib/pythonX.Y/site-packages/<entry>: how deep under lib the entries are looked for.
RUNS_FROM_DEPTH = 3


def runs_from(venv_path, max_entries=200000):
    """[[path, sha1 of a regular file's content or ""]] of the entries under venv_path/lib, at most
    RUNS_FROM_DEPTH levels down, links not followed, whose names match RUNS_FROM_PATTERNS, sorted by path.
    Raises InvalidOption when lib holds more than max_entries entries at those depths."""
    found, seen = [], 0
    level = [os.path.join(venv_path, "lib")]
    for _depth in range(RUNS_FROM_DEPTH):
        below = []
        for directory in level:
            try:
                entries = list(os.scandir(directory))
            except OSError:
                continue
            seen += len(entries)
            if seen > max_entries:
                raise InvalidOption("venv_path=%s holds more than %d entries under lib/: point venv_path at the "
                                    "virtualenv with the stack" % (venv_path, max_entries))
            for entry in entries:
                path = os.path.normpath(entry.path)
                if any(fnmatch.fnmatchcase(entry.name, pattern) for pattern in RUNS_FROM_PATTERNS):
                    found.append([path, file_sha1(path) if entry.is_file(follow_symlinks=False) else ""])
                if entry.is_dir(follow_symlinks=False):
                    below.append(path)
        level = below
    return sorted(found)


def file_sha1(path):
    digest = hashlib.sha1()
    with open(path, "rb") as stream:
        for block in iter(lambda: stream.read(1 << 16), b""):
            digest.update(block)
    return digest.hexdigest()


def runs_from_digest(venv_path):
    """The digest of runs_from(venv_path), as the role computed it from ansible.builtin.find before the module
    did (sha256 of the JSON list), so a server started by an earlier version is not restarted for it."""
    return hashlib.sha256(json.dumps(runs_from(venv_path)).encode("utf-8")).hexdigest()
