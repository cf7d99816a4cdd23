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
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.files import sha1_regular
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.runtime_env import RESTARTING_FILES

# What the server runs from in its virtualenv: the stack's packages (their versions are in the dist-info names)
# and the files the runtime_env role renders, as that role's core declares them. BLACKWELL_GPU_NODE_RUNS_FROM
# carries their digest in the server's environment, so a change there restarts the server.
STACK_PATTERNS = ("torch-*.dist-info", "sglang-*.dist-info", "sgl_kernel-*.dist-info", "flashinfer_python-*.dist-info",
                  "flashinfer_jit_cache-*.dist-info")
RUNS_FROM_PATTERNS = STACK_PATTERNS + RESTARTING_FILES


RUNS_FROM_VARIABLE = "BLACKWELL_GPU_NODE_RUNS_FROM"


# lib/pythonX.Y/site-packages/<entry>: how deep under lib the entries are looked for.
RUNS_FROM_DEPTH = 3


# The rendered files are a few KiB; a larger file at one of their names is hashed no further than this.
FILE_LIMIT = 16 << 20


def runs_from(venv_path, max_entries=200000):
    """[[path, sha1 of a regular file's content or ""]] of the entries under venv_path/lib, at most
    RUNS_FROM_DEPTH levels down, links not followed, whose names match RUNS_FROM_PATTERNS, sorted by path.
    Raises InvalidOption naming venv_path when lib holds more than max_entries entries at those depths, or when a
    file that matches is swapped for something else (a FIFO, a link) or grows past FILE_LIMIT while it is read."""
    found, seen = [], 0
    level = [os.path.join(venv_path, "lib")]
    for _depth in range(RUNS_FROM_DEPTH):
        below = []
        for directory in level:
            try:
                entries = os.scandir(directory)
            except OSError:
                continue
            with entries:
                for entry in entries:
                    seen += 1
                    if seen > max_entries:
                        raise InvalidOption("venv_path=%s holds more than %d entries under lib/: point venv_path at "
                                            "the virtualenv with the stack" % (venv_path, max_entries))
                    path = os.path.normpath(entry.path)
                    if any(fnmatch.fnmatchcase(entry.name, pattern) for pattern in RUNS_FROM_PATTERNS):
                        found.append([path, _sha1(venv_path, path) if entry.is_file(follow_symlinks=False) else ""])
                    if entry.is_dir(follow_symlinks=False):
                        below.append(path)
        level = below
    return sorted(found)


def _sha1(venv_path, path):
    try:
        return sha1_regular(path, FILE_LIMIT)
    except (OSError, InvalidOption) as exc:
        raise InvalidOption("venv_path=%s: %s cannot be fingerprinted (%s): look at who changed it; the server is "
                            "not started from a virtualenv whose files change under it" % (
                                venv_path, path, getattr(exc, "strerror", None) or exc))


def runs_from_digest(venv_path):
    """The digest of runs_from(venv_path), as the role computed it from ansible.builtin.find before the module
    did (sha256 of the JSON list), so a server started by an earlier version is not restarted for it."""
    return hashlib.sha256(json.dumps(runs_from(venv_path)).encode("utf-8")).hexdigest()
