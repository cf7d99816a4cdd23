# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which /etc/ld.so.conf.d entries point the dynamic linker at another CUDA major version: the core of
cuda_linker_entries. Pure, over the files' text and a path resolver, so that tests feed it any host.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

CUDA_DIRECTORY = re.compile(r"/usr/local/cuda-(\d+)(?:\.\d+)?(?=/|$)")


def entries(text):
    """The directories a ld.so.conf file lists: comments, blank lines and include lines are not entries."""
    found = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line and not line.startswith("include "):
            found.append(line)
    return found


def cuda_major(entry, resolve):
    """The CUDA major version a directory belongs to, following links (/usr/local/cuda -> cuda-12.8); None when
    it is not a CUDA directory."""
    for path in (resolve(entry), entry):
        match = CUDA_DIRECTORY.search(path)
        if match:
            return int(match.group(1))
    return None


def classify(files, major, resolve):
    """files: {path: text}. Returns stale entries, the files made only of them (safe to disable whole) and the
    files that mix them with other entries (reported, never edited)."""
    stale, whole, mixed = [], [], []
    for path in sorted(files):
        listed = entries(files[path])
        other = [entry for entry in listed if cuda_major(entry, resolve) not in (None, major)]
        if not other:
            continue
        stale.extend(dict(file=path, entry=entry, major=cuda_major(entry, resolve)) for entry in other)
        (whole if len(other) == len(listed) else mixed).append(path)
    return dict(stale_entries=stale, stale_files=whole, mixed_files=mixed)
