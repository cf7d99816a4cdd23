#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: venv_files
short_description: Write root's and the owner's files into a virtualenv another user owns, never through a link (internal)
version_added: 0.1.0
author:
  - Blackwell GPU node maintainers (@blackwell-gpu-node)
description:
  - Internal to the C(blackwell.gpu_node.ml_stack) role, which calls it; not meant for playbooks of your own.
  - The virtualenv O(path) lies in a directory its owner can write (its home), so the owner could swap it for a link
    to any directory of the host between a check and a write by path. This module opens the directory that holds
    it once, then O(path) itself without following a link, and writes, removes or hands over everything through
    that descriptor.
  - Each file of O(files) is written atomically (a new file under a random name, its owner and mode set on its
    descriptor, renamed over the old one), so a link planted at its name is replaced, never written through; a file
    already as asked is left alone.
  - O(owner) names the virtualenv's owner; O(path) must belong to it (or to root without O(owner)).
    O(take_ownership=true) first hands the whole virtualenv to O(owner), bottom-up and never through a link; a
    virtualenv built as root by an earlier release is given to its owner that way.
  - O(clear_group_other_write=true) then takes the write permission of the group and of others from every entry
    of the virtualenv, so that no user but its owner and root can change the code it runs. The walk is bottom-up
    and never follows a link; an entry that needs a change is opened without following a link and changed through
    that descriptor.
extends_documentation_fragment:
  - blackwell.gpu_node.attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
    details: Each file's content before and after.
  platform:
    support: full
    platforms: debian
options:
  path:
    description: The virtualenv's directory (not the stable link that points at it).
    type: path
    required: true
  owner:
    description: The virtualenv's owner; without it, root.
    type: str
  take_ownership:
    description:
      - Give the virtualenv and everything in it to O(owner) (and its primary group) first, links themselves and
        never what they point to; an entry that is already the owner's is left alone.
      - An entry to give that is not a directory and has another hard link fails the task naming it, before
        anything is given, as its other name may lie outside the virtualenv (a file of root's that the owner linked
        there) and giving it would give the owner that file (remove the hard link from the virtualenv).
      - The task reports a change only when an entry was not the owner's. Check mode walks the virtualenv as the
        run would, refusing such a hard link the same way, and hands nothing over.
    type: bool
    default: false
  clear_group_other_write:
    description:
      - Remove the write permission of the group and of others (C(chmod go-w)) from the virtualenv's directory and
        from every file, directory and FIFO in it, never following a link (a link's own mode means nothing).
      - Only entries of O(owner) (root without O(owner)) or root are changed. An entry of another user fails the
        task naming it, whatever its mode, as that user can change it (give it to the owner, or remove it); so does
        a socket or a device that its group or others can write, and, in a virtualenv of an owner other than root,
        such a file of root's with another hard link, as its mode is that of a file of root's outside the
        virtualenv (remove the hard link from the virtualenv). Entries changed before such a failure stay changed,
        and are listed in RV(write_cleared).
      - With O(take_ownership=true), in check mode, every entry counts as the owner's, as the run would make it.
      - The walk looks at no more than 500000 entries (about ten torch virtualenvs); a larger tree fails the task.
      - Runs before O(files) are written. Check mode reports what would change and changes nothing.
    type: bool
    default: false
  files:
    description: The files in the virtualenv's directory.
    type: list
    elements: dict
    default: []
    suboptions:
      name:
        description: The file's name in O(path); a plain name, no C(/).
        type: str
        required: true
      content:
        description: Its content; required unless O(files[].state=absent).
        type: str
      state:
        description: V(present) writes it, V(absent) removes it.
        type: str
        choices: [present, absent]
        default: present
      root:
        description: The file belongs to root (V(true)) or to O(owner) (V(false)).
        type: bool
        default: false
      mode:
        description: Its mode.
        type: str
        default: "0644"
"""

EXAMPLES = r"""
- name: Pin every pip run in the virtualenv, root's files
  blackwell.gpu_node.venv_files:
    path: /home/sglang/ml-env.cu130-1a2b3c4d
    owner: sglang
    files:
      - {name: pip.conf, content: "[install]\nconstraint = ...\n", root: true}

- name: Ensure no user but the owner and root can change the code the virtualenv runs
  blackwell.gpu_node.venv_files:
    path: /home/sglang/ml-env.cu130-1a2b3c4d
    owner: sglang
    clear_group_other_write: true
"""

RETURN = r"""
written:
  description: The names of the files written (in check mode, that would be written).
  returned: always
  type: list
  elements: str
removed:
  description: The names of the files removed (in check mode, that would be removed).
  returned: always
  type: list
  elements: str
write_cleared:
  description:
    - The entries whose group and others lost the write permission (in check mode, would lose it), in the order of
      the walk (the virtualenv's directory last); at most the first 20, RV(write_cleared_count) counts them all.
    - Empty without O(clear_group_other_write).
  returned: always
  type: list
  elements: dict
  contains:
    path:
      description: The entry's path.
      type: str
      sample: /home/sglang/ml-env.cu130-1a2b3c4d/lib/python3.11/site-packages/torch/__init__.py
    mode_before:
      description: Its mode before, in octal.
      type: str
      sample: "0666"
    mode:
      description: Its mode after, in octal.
      type: str
      sample: "0644"
write_cleared_count:
  description: How many entries lost (in check mode, would lose) the write permission of their group and others.
  returned: always
  type: int
  sample: 1
"""

import os
import re

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.accounts import account, described_user
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.errors import InvalidOption
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.files import (
    chown_tree,
    clear_group_other_write,
    open_beneath,
    read_regular,
    remove,
    write_atomically,
)

OPTION = "ml_stack_venv_path"
NAME = re.compile(r"[A-Za-z0-9_.-]+")
MODE = re.compile(r"0?[0-7]{3}")
# The virtualenv's own small files: pins, marker, explanations.
FILE_LIMIT = 1 << 20
# The entries of write_cleared returned; a virtualenv whose every entry was opened to others would return tens of
# thousands.
CLEARED_SHOWN = 20


def wanted(files, owner):
    """(name, content, uid, gid, mode) of each file to be present, [names to be absent]; InvalidOption naming the
    option for a bad name or mode."""
    present, absent = [], []
    for index, entry in enumerate(files):
        if not NAME.fullmatch(entry["name"]) or entry["name"] in (".", ".."):
            raise InvalidOption("files[%d].name=%r is not a plain file name" % (index, entry["name"]))
        if entry["state"] == "absent":
            absent.append(entry["name"])
            continue
        if entry["content"] is None or not MODE.fullmatch(entry["mode"]):
            raise InvalidOption("files[%d] (%s) needs a content and a mode like 0644" % (index, entry["name"]))
        uid, gid = (0, 0) if entry["root"] or owner is None else (owner["uid"], owner["gid"])
        present.append((entry["name"], entry["content"], uid, gid, int(entry["mode"], 8)))
    return present, absent


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            owner=dict(type="str"),
            take_ownership=dict(type="bool", default=False),
            clear_group_other_write=dict(type="bool", default=False),
            files=dict(type="list", elements="dict", default=[], options=dict(
                name=dict(type="str", required=True),
                content=dict(type="str", no_log=False),
                state=dict(type="str", choices=["present", "absent"], default="present"),
                root=dict(type="bool", default=False),
                mode=dict(type="str", default="0644"),
            )),
        ),
        supports_check_mode=True,
    )
    params = module.params
    result = dict(changed=False, written=[], removed=[], write_cleared=[], write_cleared_count=0, diff=[])
    owner = None
    if params["owner"] is not None:
        owner = account(params["owner"])
        if owner is None:
            module.fail_json(msg="ml_stack_venv_owner=%s is not a user on this host. Nothing was changed." % params["owner"])
    try:
        present, absent = wanted(params["files"], owner)
        directory = open_beneath(params["path"], OPTION)
    except FileNotFoundError:
        module.fail_json(msg="%s: the virtualenv %s does not exist. Nothing was changed." % (OPTION, params["path"]))
    except InvalidOption as exc:
        module.fail_json(msg="%s. Nothing was changed." % exc)
    try:
        expected_uid = 0 if owner is None else owner["uid"]
        if params["take_ownership"] and owner is not None:
            result["changed"] = chown_tree(directory, params["path"], owner["uid"], owner["gid"], module.check_mode)
        elif os.fstat(directory).st_uid != expected_uid:
            module.fail_json(msg="%s belongs to %s, not to %s: root writes only into the virtualenv of its owner. "
                                 "Nothing was changed." % (params["path"], described_user(os.fstat(directory).st_uid),
                                                           described_user(expected_uid)), **result)
        if params["clear_group_other_write"]:
            # Past take_ownership every entry is the owner's; in check mode, where no owner changed, it counts as such.
            owners = None if params["take_ownership"] and owner is not None else (expected_uid, 0)
            for entry, before, after in clear_group_other_write(directory, params["path"], owners, module.check_mode):
                if result["write_cleared_count"] < CLEARED_SHOWN:
                    result["write_cleared"].append(dict(path=entry, mode_before="%04o" % before, mode="%04o" % after))
                result["write_cleared_count"] += 1
        for name, content, uid, gid, mode in present:
            try:
                found = read_regular(name, FILE_LIMIT, directory)
            except InvalidOption:
                found = None  # a link or a FIFO there: replaced by the rename, never followed
            data = content.encode("utf-8")
            if found is not None and (found["data"], found["uid"], found["gid"], found["mode"]) == (data, uid, gid,
                                                                                                    mode):
                continue
            if not module.check_mode:
                write_atomically(directory, name, data, mode, (uid, gid))
            result["written"].append(name)
            result["diff"].append(dict(before_header=name, after_header=name, after=content,
                                       before=found["data"].decode("utf-8", "replace") if found else ""))
        for name in absent:
            if module.check_mode:
                try:
                    os.lstat(name, dir_fd=directory)
                    exists = True
                except FileNotFoundError:
                    exists = False
            else:
                exists = remove(directory, name)
            if exists:
                result["removed"].append(name)
    except InvalidOption as exc:
        module.fail_json(msg="%s=%s: %s, then run again." % (OPTION, params["path"], exc), **result)
    except OSError as exc:
        module.fail_json(msg="%s: writing into %s failed: %s. Written before it failed: %s." % (
            OPTION, params["path"], exc.strerror or exc, ", ".join(result["written"]) or "nothing"), **result)
    finally:
        os.close(directory)
    result["changed"] = result["changed"] or bool(result["written"] or result["removed"] or result["write_cleared"])
    if not module._diff:
        result.pop("diff")
    module.exit_json(**result)


if __name__ == "__main__":
    main()
