# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Private to the blackwell.gpu_node collection: not a public API, it may change in any release.
"""The upgrade's lock and switch record as they lie on a node, read for the upgrade_state and upgrade_state_info
modules: one reader, so that what the playbooks check before they serve is what the upgrade takes and writes."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

import os

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.errors import InvalidOption
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.files import (
    read_regular,
    trusted_state_subdirectory,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.upgrade import (
    DIRECTORY,
    LIMIT,
    LOCK,
    RECORD,
    BadState,
    decoded,
    left_behind,
    owner_problems,
    record_problems,
)


def upgrade_directory(state_dir, create):
    """A descriptor of <state_dir>/upgrade (trusted_state_subdirectory); None when it does not exist."""
    return trusted_state_subdirectory(state_dir, DIRECTORY, "the upgrade directory of state_dir", create)


def read(directory, name, what, problems_of, path):
    found = read_regular(name, LIMIT, directory)
    if found is None:
        return None
    try:
        return decoded(found["data"], what, problems_of)
    except BadState as exc:
        raise InvalidOption("%s: %s. No run of this collection wrote it: look at it, and remove it if no upgrade "
                            "is under way" % (path, exc))


class Node(object):
    """<state_dir>/upgrade, held open while the lock and the record are read and changed."""

    def __init__(self, state_dir, create):
        self.path = os.path.join(state_dir, DIRECTORY)
        self.directory = upgrade_directory(state_dir, create)

    def close(self):
        if self.directory is not None:
            os.close(self.directory)

    def lock(self):
        if self.directory is None:
            return None
        return read(self.directory, LOCK, "lock", owner_problems, os.path.join(self.path, LOCK))

    def record(self):
        if self.directory is None:
            return None
        return read(self.directory, RECORD, "switch record", record_problems, os.path.join(self.path, RECORD))


def lock_path(state_dir):
    return os.path.join(state_dir, DIRECTORY, LOCK)


def observed(state_dir, now):
    """(the run that holds the lock or None, the switch record or None, what they mean or ""), changing nothing.
    InvalidOption or OSError when either cannot be read."""
    node = Node(state_dir, create=False)
    try:
        holder, record = node.lock(), node.record()
    finally:
        node.close()
    return holder, record, left_behind(holder, record, now, lock_path(state_dir))
