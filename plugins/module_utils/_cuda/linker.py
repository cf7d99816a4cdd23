# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Private to the blackwell.gpu_node collection: not a public API, it may change in any release.
"""Which /etc/ld.so.conf.d entries point the dynamic linker at another CUDA major version: the core of
cuda_linker_entries. Pure, over the files' text and a path resolver, so that tests feed it any host, but for
reading the directory.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

import os
import re

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.text import bounded_int, control_character_problem

# ASCII digits: \d would read "cuda-١٢" as CUDA 12.
CUDA_DIRECTORY = re.compile(r"/usr/local/cuda-([0-9]+)(?:\.[0-9]+)?(?=/|\Z)")


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
            return bounded_int(match.group(1))
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


def option_problems(major, suffix):
    """What is wrong with the module's options, before anything is renamed: each would disable the wrong files."""
    problems = []
    if major < 1:
        problems.append("major=%d must be a CUDA major version, 1 or more" % major)
    control = control_character_problem(suffix, "suffix")
    if suffix == "":
        problems.append("suffix='' must not be empty: the file would keep its name")
    elif control:
        problems.append(control)
    elif "/" in suffix:
        problems.append("suffix=%r must not hold '/': the file would move out of conf_dir" % suffix)
    elif suffix.endswith(".conf"):
        problems.append("suffix=%r must not end in .conf: ldconfig would still read the file" % suffix)
    return problems


def own_file_problem(conf_dir, path):
    """Why path cannot be the collection's own linker file, or None: ldconfig reads only *.conf files of
    conf_dir."""
    if os.path.dirname(path) != conf_dir.rstrip("/") or not os.path.basename(path).endswith(".conf"):
        return "own_file=%s must be a *.conf file directly in conf_dir=%s, which ldconfig reads" % (path, conf_dir)
    return None


# The collection's own linker file is root's with this mode; the cuda role's other registration files take it too.
OWN_FILE_MODE = 0o644


def own_file_needs_writing(state, content):
    """Whether the collection's own linker file must be written: state is what file_state read (None when no
    regular UTF-8 file is there); it must be root's, mode 0644, with exactly content."""
    return state is None or state["uid"] != 0 or state["mode"] != OWN_FILE_MODE or state["content"] != content


def read_conf_files(conf_dir):
    """The *.conf files of conf_dir as {path: text}, and the paths of those that are not UTF-8 text.

    Read as bytes: a file with another encoding (a Latin-1 comment) must not stop the module. It is neither
    classified nor disabled, only reported, so that someone looks at it.
    """
    files, undecodable = {}, []
    for name in sorted(os.listdir(conf_dir)):
        path = os.path.join(conf_dir, name)
        if name.endswith(".conf") and os.path.isfile(path):
            with open(path, "rb") as handle:
                data = handle.read()
            try:
                files[path] = data.decode("utf-8")
            except UnicodeDecodeError:
                undecodable.append(path)
    return files, undecodable
