# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Private to the blackwell.gpu_node collection: not a public API, it may change in any release.
"""What the node_snapshot and node_snapshot_info modules read on the host: the stack the node runs, in the shape
of a snapshot, and the snapshot recorded in the state directory. One reader, so that what the info module shows is
what a recording writes and a restore trusts."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

import os

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.defaults import STATE_DIR
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.errors import InvalidOption
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.files import (
    FileRefused,
    directory_entry,
    open_resolved,
    path_kind,
    read_regular,
    trusted_state_subdirectory,
    walk,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.instance import BadState, Instance
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.ml_stack import MARKER, is_profile_virtualenv
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.snapshot import (
    CUDA_LINK,
    FILE_LIMIT,
    LINKER_CONF,
    LINKER_DIR,
    MARKER_LIMIT,
    PROFILE_SCRIPT,
    SNAPSHOT_LIMIT,
    marker_profile,
    observation,
    parsed_snapshot,
    server_record,
    server_secrets,
)

# The options that locate what both modules read; node_snapshot adds what recording and restoring need.
READ_OPTIONS = dict(
    name=dict(type="str", default="pre-upgrade"),
    venv_path=dict(type="path", required=True),
    state_dir=dict(type="path", default=STATE_DIR),
    server_name=dict(type="str", default="sglang"),
    server_state_dir=dict(type="path", default=STATE_DIR),
)


def snapshot_path(params):
    """The file of the snapshot params name."""
    return os.path.join(params["state_dir"], "snapshots", params["name"] + ".json")


def parent_directory(path):
    """(descriptor of the directory that holds path, path's name), or (None, name) when that directory does not
    exist. Links above it are resolved once; nothing below is followed."""
    parent, name = os.path.split(path.rstrip("/"))
    try:
        descriptor, _real = open_resolved(parent or "/", "the directory of %s" % path)
    except InvalidOption:
        if path_kind(parent) is None:
            return None, name
        raise
    return descriptor, name


def observe_venv(venv_path):
    """(what the stable path is, its link target, the profile its virtualenv's marker names). The virtualenv is
    its owner's: a directory at the stable path, or a link's target that names a profile's virtualenv beside the
    link, is entered as a directory of that name (no link followed), and its marker is read only as a small
    regular file."""
    parent, name = parent_directory(venv_path)
    if parent is None:
        return None, None, None
    try:
        entry = directory_entry(parent, name)
        if entry is None:
            return None, None, None
        # A plain virtualenv at the stable path is entered as itself; a link only when it names a profile's.
        inside = name if entry["kind"] == "directory" else entry["target"]
        if entry["kind"] != "directory" and not is_profile_virtualenv(venv_path, entry["target"]):
            return entry["kind"], entry["target"], None
        return entry["kind"], entry["target"], profile_in(parent, inside)
    finally:
        os.close(parent)


def profile_in(parent, name):
    """The profile that the marker of the virtualenv name (in the directory parent) names, None where there is
    none to read: the virtualenv is entered as a directory of that name, no link followed, and its marker read
    only as a small regular file."""
    try:
        venv, _levels = walk(parent, name, "venv_path")
    except (OSError, InvalidOption):
        return None
    try:
        found = read_regular(MARKER, MARKER_LIMIT, venv)
    except (OSError, InvalidOption):
        found = None
    finally:
        os.close(venv)
    return marker_profile(found["data"] if found else None)


def entry_in(path):
    """directory_entry of path in its directory; None when either is missing."""
    parent, name = parent_directory(path)
    if parent is None:
        return None
    try:
        return directory_entry(parent, name)
    finally:
        os.close(parent)


def observe_file(path):
    """The text of the cuda role's file path, None when it is missing; FileRefused for anything but a regular
    UTF-8 file within FILE_LIMIT."""
    parent, name = parent_directory(path)
    if parent is None:
        return None
    try:
        found = read_regular(name, FILE_LIMIT, parent)
    finally:
        os.close(parent)
    if found is None:
        return None
    try:
        return found["data"].decode("utf-8")
    except UnicodeDecodeError:
        raise FileRefused("%s is not UTF-8 text: the cuda role writes text there; look at it" % path)


def alternatives(module, *args):
    """The lines update-alternatives prints for args; None where it is missing or knows no cuda alternative."""
    binary = module.get_bin_path("update-alternatives")
    if not binary:
        return None
    rc, out, _err = module.run_command([binary] + list(args))
    return out.splitlines() if rc == 0 else None


def cuda_alternative(module):
    """The cuda alternative's value; None where no alternative manages /usr/local/cuda."""
    lines = alternatives(module, "--query", "cuda") or []
    values = [line[len("Value: "):] for line in lines if line.startswith("Value: ")]
    return values[0] if values else None


def server_state(module):
    """The server as a snapshot keeps it; the values it masks are masked in every result too."""
    try:
        state = Instance(module.params["server_state_dir"], module.params["server_name"]).load()
    except (BadState, InvalidOption) as exc:
        return {"problem": str(exc)}
    module.no_log_values.update(server_secrets(state))
    return server_record(state)


def observe(module):
    """(the observation of now, the names in LINKER_DIR, the kinds of the stable path and of /usr/local/cuda)."""
    venv_path = module.params["venv_path"]
    venv_kind, venv_target, profile = observe_venv(venv_path)
    cuda = entry_in(CUDA_LINK)
    linker_files = sorted(os.listdir(LINKER_DIR)) if path_kind(LINKER_DIR) == "directory" else []
    current = observation(
        venv_path=venv_path,
        venv_target=venv_target,
        venv_profile=profile,
        cuda_alternative=cuda_alternative(module),
        cuda_target=cuda["target"] if cuda else None,
        files=dict((path, observe_file(path)) for path in (LINKER_CONF, PROFILE_SCRIPT)),
        linker_files=linker_files,
        server=server_state(module),
    )
    return current, linker_files, venv_kind, cuda["kind"] if cuda else None


def snapshot_directory(state_dir, create=False):
    """A descriptor of <state_dir>/snapshots (trusted_state_subdirectory); None when it does not exist."""
    return trusted_state_subdirectory(state_dir, "snapshots", "the snapshots of state_dir", create)


def read_snapshot(directory, path):
    """The bytes of the snapshot file path (in directory), None when there is none. InvalidOption naming the file
    when it is not a regular file of root's that nobody else can write."""
    try:
        found = read_regular(os.path.basename(path), SNAPSHOT_LIMIT, directory)
    except FileRefused as exc:
        raise InvalidOption("The snapshot %s cannot be read: %s" % (path, exc))
    if found is None:
        return None
    if found["uid"] != 0 or found["mode"] & 0o022:
        raise InvalidOption("The snapshot %s is not trusted: it belongs to uid %d with mode %04o, and only a file of "
                            "root's that nobody else can write is restored (state=recorded writes it root's, 0600). "
                            "Record it again" % (path, found["uid"], found["mode"]))
    return found["data"]


def current_snapshot(module, path):
    """The recorded snapshot a restore would accept, None when there is none; one that cannot be trusted is
    reported as a warning, not used."""
    try:
        directory = snapshot_directory(module.params["state_dir"])
        if directory is None:
            return None
        try:
            data = read_snapshot(directory, path)
            return None if data is None else parsed_snapshot(data, path, module.params["venv_path"])
        finally:
            os.close(directory)
    except InvalidOption as exc:
        module.warn("%s; it is not shown" % exc)
        return None


def information(module):
    """What node_snapshot_info returns: the stack the node runs, in the shape of a snapshot, and the recorded
    snapshot a restore would accept. InvalidOption or OSError when the node cannot be read."""
    path = snapshot_path(module.params)
    current, _linker_files, _venv_kind, _cuda_kind = observe(module)
    return dict(current=current, snapshot=current_snapshot(module, path), path=path)
