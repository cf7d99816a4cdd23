# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Private to the blackwell.gpu_node collection: not a public API, it may change in any release.
"""The JIT caches of the SGLang server's stack: one set of directories per stack profile, in the service user's tree,
and the variables that send each cache there.

Every JIT compiler of the stack keeps its cache under ``~`` or ``/tmp`` unless a variable of its own says otherwise
(flashinfer creates its directory at import and fails on a HOME that does not exist; Inductor's is in ``/tmp``,
which the unit's PrivateTmp empties at each start). Some caches are keyed without the compiler that filled them
(flashinfer by its version and the GPU architectures, tvm-ffi by the source, ``TORCH_EXTENSIONS_DIR`` by the
extension's name): two profiles whose nvcc or torch differ must never share one. So each profile gets its own
directory, ``<cache root>/<profile name>-<digest>``, the digest covering what decides the compilers.

``cache_environment`` is pure: the role's filter renders what it returns. ``settle_cache_directories`` runs on the
host, as root, in a tree the service user can change.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

import errno
import hashlib
import json
import os
import re
import stat

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.accounts import described_user
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.errors import InvalidOption
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.files import (
    DIRECTORY_FLAGS,
    mode_kind,
    path_components,
)

OPTION = "runtime_env_cache_root"
# Each cache's directory below the profile's, and the variables that name it. SGLang overwrites DG_JIT_CACHE_DIR
# with SGLANG_DG_CACHE_DIR at import, so both point at DeepGEMM's. TRITON_HOME also holds Triton's dump and
# override directories.
CACHES = (
    ("cuda", ("CUDA_CACHE_PATH",)),
    ("cute-dsl", ("CUTE_DSL_CACHE_DIR",)),
    ("deep_gemm", ("DG_JIT_CACHE_DIR", "SGLANG_DG_CACHE_DIR")),
    ("flashinfer", ("FLASHINFER_WORKSPACE_BASE",)),
    ("inductor", ("TORCHINDUCTOR_CACHE_DIR",)),
    ("sglang", ("SGLANG_CACHE_DIR",)),
    ("tilelang", ("TILELANG_CACHE_DIR",)),
    ("torch_extensions", ("TORCH_EXTENSIONS_DIR",)),
    ("triton", ("TRITON_HOME",)),
    ("triton/cache", ("TRITON_CACHE_DIR",)),
    ("tvm-ffi", ("TVM_FFI_CACHE_DIR",)),
    ("xdg", ("XDG_CACHE_HOME",)),
)
CACHE_VARIABLES = tuple(sorted(name for _directory, names in CACHES for name in names))
# What decides the compilers, in the stack profile: nvcc and ptxas come with the CUDA toolkit; torch compiles
# Inductor's and extensions' code against itself and pins the Triton it runs. The packages that bring JIT sources
# (flashinfer, the kernel's DeepGEMM, SGLang) key their caches by their own version or source, and belong to the
# profile's name anyway.
COMPILER_FIELDS = ("cuda.version", "python.torch.version", "python.torch.cuda")
DIGEST_LENGTH = 12
# The paths reach ninja build files and compiler command lines, where a space, '$' or ':' is syntax, as well as the
# rendered Python module (a JSON string there): plain characters only.
PLAIN_PATH = re.compile(r"(/[A-Za-z0-9._+-]+)+")
PROFILE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,99}")
CACHE_MODE = 0o700


class CacheRefused(InvalidOption):
    """The cache directories cannot be kept: the message names runtime_env_cache_root, the path and the fix."""


def plain_path_problem(value, variable):
    """Why value cannot be a directory the role renders, or None: an absolute path of plain names."""
    if not isinstance(value, str) or not PLAIN_PATH.fullmatch(value) or \
            any(name in (".", "..") for name in value.split("/")):
        return ("%s=%r is not an absolute path of plain names: letters, digits, '.', '_', '+' and '-' between "
                "single '/', no '.' or '..' and no trailing '/' (the path reaches ninja files and compiler command "
                "lines, where other characters are syntax)" % (variable, value))
    return None


def _field(profile, dotted):
    value = profile
    for key in dotted.split("."):
        value = value.get(key) if isinstance(value, dict) else None
    return value


def profile_directory(profile, problems):
    """``<name>-<digest>``: the directory of the stack profile's caches below the cache root, the digest covering
    COMPILER_FIELDS; None with a problem naming stack_selected when the profile lacks one of them."""
    name = _field(profile, "name")
    found = [_field(profile, field) for field in COMPILER_FIELDS]
    missing = [field for field, value in zip(("name",) + COMPILER_FIELDS, [name] + found)
               if not isinstance(value, str) or not value]
    if missing:
        problems.append("stack_selected lacks %s, which name the directory of the profile's JIT caches: the stack "
                        "role resolves stack_profile into stack_selected; run it in the play (blackwell.gpu_node.stack)"
                        % ", ".join(missing))
        return None
    if not PROFILE_NAME.fullmatch(name):
        problems.append("stack_selected.name=%r cannot name a directory: letters, digits, '.', '_', '+' and '-', "
                        "starting with a letter or digit, at most 100" % (name,))
        return None
    digest = hashlib.sha256(json.dumps(dict(zip(COMPILER_FIELDS, found)), sort_keys=True).encode("utf-8"))
    return "%s-%s" % (name, digest.hexdigest()[:DIGEST_LENGTH])


def cache_directories():
    """Every directory below a profile's, relative to it, parents first."""
    directories = set()
    for directory, _names in CACHES:
        parts = directory.split("/")
        directories.update("/".join(parts[:index]) for index in range(1, len(parts) + 1))
    return sorted(directories, key=lambda path: (path.count("/"), path))


def cache_environment(cache_root, profile, problems):
    """(variables, cache) for cache_root and the stack profile (stack_selected): each cache variable pointing into
    the profile's directory, and {"root", "directories"}: the directories the role keeps, relative to the root,
    parents first. A cache_root of None renders nothing and keeps nothing. Problems are appended."""
    if cache_root is None:
        return {}, {"root": None, "directories": []}
    problem = plain_path_problem(cache_root, OPTION)
    if problem:
        problems.append(problem)
    directory = profile_directory(profile, problems)
    if problem or directory is None:
        return {}, {"root": None, "directories": []}
    variables = dict((name, "%s/%s/%s" % (cache_root, directory, below))
                     for below, names in CACHES for name in names)
    return variables, {"root": cache_root,
                       "directories": [directory] + ["%s/%s" % (directory, below) for below in cache_directories()]}


def _levels(root, directories):
    """(path, parent, name, kept) of each level from / to every directory, parents first: the root's ancestors are
    not kept (only entered), the root and the directories below it are."""
    parts = path_components(root.lstrip("/"), OPTION)
    levels, seen = [], set()
    for index, name in enumerate(parts):
        path = "/" + "/".join(parts[:index + 1])
        levels.append((path, os.path.dirname(path), name, index == len(parts) - 1))
        seen.add(path)
    for relative in directories:
        names = path_components(relative, OPTION)
        for index, name in enumerate(names):
            path = "%s/%s" % (root, "/".join(names[:index + 1]))
            if path not in seen:
                seen.add(path)
                levels.append((path, os.path.dirname(path), name, True))
    return levels


def _judged(info, path, kept, owner_uid):
    """Why root may not enter or keep the directory path (its fstat) for owner_uid's caches, or None. A kept level
    must be the owner's. One above may be the owner's, or root's and writable by nobody else (sticky, like /tmp: only
    its owner can swap an entry there)."""
    if kept and info.st_uid != owner_uid:
        return ("%s belongs to %s, not to %s, whose JIT caches go there: give it to that user (chown -R %s: %s), or "
                "set %s elsewhere" % (path, described_user(info.st_uid), described_user(owner_uid),
                                      described_user(owner_uid), path, OPTION))
    if kept or info.st_uid == owner_uid:
        return None
    if info.st_uid != 0:
        return ("%s belongs to %s, who could replace what lies below it: set %s below a directory of root's or of "
                "%s" % (path, described_user(info.st_uid), OPTION, described_user(owner_uid)))
    if info.st_mode & 0o022 and not info.st_mode & stat.S_ISVTX:
        return ("%s is writable by its group or others (mode %04o), who could replace what lies below it: chmod "
                "go-w %s, or set %s elsewhere" % (path, stat.S_IMODE(info.st_mode), path, OPTION))
    return None


def _created(parent_fd, name, path, owner):
    """A descriptor of the new directory name, made in parent_fd and given to owner (uid, gid), mode CACHE_MODE.
    Opened without following a link; refused unless it is the empty directory this process just made (another user
    could have put one there first)."""
    try:
        os.mkdir(name, CACHE_MODE, dir_fd=parent_fd)
    except FileExistsError:
        pass
    descriptor = os.open(name, DIRECTORY_FLAGS, dir_fd=parent_fd)
    try:
        if os.fstat(descriptor).st_uid != os.geteuid() or os.listdir(descriptor):
            raise CacheRefused("%s appeared while the role created it, made by someone else: find out who, and run "
                               "again" % path)
        os.fchown(descriptor, owner[0], owner[1])
        os.fchmod(descriptor, CACHE_MODE)
    except BaseException:
        os.close(descriptor)
        raise
    return descriptor


def _entered(parent_fd, name, path):
    """A descriptor of the directory name in parent_fd, opened without following a link; None when nothing is
    there. CacheRefused for a link, a file or anything else root cannot enter."""
    try:
        return os.open(name, DIRECTORY_FLAGS, dir_fd=parent_fd)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return None
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise CacheRefused("%s is a %s, not a directory: root enters no link in a tree another user can change. "
                               "Remove it; the role makes a directory there"
                               % (path, mode_kind(os.lstat(name, dir_fd=parent_fd).st_mode)))
        raise CacheRefused("%s cannot be entered: %s" % (path, exc.strerror))


def settle_cache_directories(root, directories, owner, create=False):
    """[(path, what)] of the cache directories that are not as the role keeps them (what: "missing", or "of mode 0755,
    not 0700"); with create, each is made so: root and directories (relative to it) owner's (uid, gid), mode 0700,
    and missing levels above root created so too. Every level is entered from / through its parent's descriptor,
    never following a link. CacheRefused naming runtime_env_cache_root for a link or a file where a level should
    be, a kept level that is not the owner's, or a level above that another user could swap: a look without create
    finds each of them, so the caller refuses before anything changes."""
    changes, opened, missing = [], {}, set()
    opened["/"] = os.open("/", DIRECTORY_FLAGS)
    try:
        problem = _judged(os.fstat(opened["/"]), "/", False, owner[0])
        if problem:
            raise CacheRefused(problem)
        for path, parent, name, kept in _levels(root, directories):
            descriptor = None if parent in missing else _entered(opened[parent], name, path)
            if descriptor is None:
                changes.append((path, "missing"))
                if not create:
                    missing.add(path)
                    continue
                descriptor = _created(opened[parent], name, path, owner)
            opened[path] = descriptor
            info = os.fstat(descriptor)
            problem = _judged(info, path, kept, owner[0])
            if problem:
                raise CacheRefused(problem)
            if kept and stat.S_IMODE(info.st_mode) != CACHE_MODE:
                changes.append((path, "of mode %04o, not %04o" % (stat.S_IMODE(info.st_mode), CACHE_MODE)))
                if create:
                    os.fchmod(descriptor, CACHE_MODE)
    except CacheRefused as exc:
        raise CacheRefused("%s=%s: %s" % (OPTION, root, exc))
    finally:
        for descriptor in opened.values():
            os.close(descriptor)
    return changes
