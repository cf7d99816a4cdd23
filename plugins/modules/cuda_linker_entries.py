#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: cuda_linker_entries
short_description: Find, and disable, dynamic linker entries for another CUDA major version (internal)
version_added: 0.1.0
author:
  - Blackwell GPU node maintainers (@blackwell-gpu-node)
description:
  - Internal to the C(blackwell.gpu_node.cuda) role, which calls it; not meant for playbooks of your own.
  - Reads every C(*.conf) file in O(conf_dir) and finds the directories that belong to a CUDA installation of
    another major version than O(major), following links (C(/usr/local/cuda) pointing at C(cuda-12.8) counts
    as 12). Such entries make programs load C(libcudart.so.12) or C(libnvrtc.so.12) on a CUDA 13 host.
  - With O(stale=disable), a file made only of such entries is renamed with O(suffix), so that C(ldconfig)
    no longer reads it and the original can be restored by renaming it back. A file that mixes them with
    other entries is reported and never edited.
  - A C(*.conf) file that is not UTF-8 text is neither checked nor changed; it is listed in RV(undecodable_files)
    with a warning.
  - Given O(own_file), the collection's own linker file, it first writes that with O(own_content) where its bytes,
    owner or mode differ, root's and C(0644), replaced atomically and never written through a link. The other
    files are then checked against what the linker will read, so that the earlier text of that file (the CUDA
    the host ran before) is never taken for a stale entry. One call does both, so that an upgrade's switch pays
    for one task.
  - Run C(ldconfig) afterwards when the task reports a change.
extends_documentation_fragment:
  - blackwell.gpu_node.attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
    details: The C(*.conf) files before and after.
  platform:
    support: full
    platforms: debian
options:
  major:
    description: The CUDA major version the linker should see, for example V(13); 1 or more.
    type: int
    required: true
  conf_dir:
    description: Directory of the dynamic linker's configuration files.
    type: path
    default: /etc/ld.so.conf.d
  stale:
    description: V(disable) renames files made only of stale entries; V(report) only lists them.
    type: str
    choices: [disable, report]
    default: disable
  own_file:
    description:
      - The collection's own linker file, a C(*.conf) file directly in O(conf_dir), written with O(own_content).
      - Unset, no file is written.
    type: path
  own_content:
    description: The text of O(own_file); required with it.
    type: str
  suffix:
    description:
      - Appended to the name of a disabled file.
      - Not empty, no C(/), no control character, and not ending in C(.conf) (C(ldconfig) would still read the
        file).
    type: str
    default: .disabled-by-blackwell-gpu-node
"""

EXAMPLES = r"""
- name: Ensure the linker sees no CUDA 12 directory
  blackwell.gpu_node.cuda_linker_entries:
    major: 13
  register: linker

- name: Ensure the linker reads CUDA 13's lib64 and no CUDA 12 directory
  blackwell.gpu_node.cuda_linker_entries:
    major: 13
    own_file: /etc/ld.so.conf.d/000-blackwell-gpu-node-cuda.conf
    own_content: "/usr/local/cuda-13.0/lib64\n"
  register: linker

- name: Refresh the linker cache when a file was disabled or written
  ansible.builtin.command: ldconfig
  when: linker is changed
"""

RETURN = r"""
stale_entries:
  description: Every entry of another CUDA major version, with its file.
  returned: always
  type: list
  elements: dict
  sample: [{"file": "/etc/ld.so.conf.d/987_cuda-12.conf", "entry": "/usr/local/cuda-12/targets/x86_64-linux/lib", "major": 12}]
disabled:
  description: Files renamed (or, in check mode, that would be), each C(from) and C(to).
  returned: always
  type: list
  elements: dict
mixed_files:
  description: Files with stale entries among others, left as they are; edit them by hand.
  returned: always
  type: list
  elements: str
own_file_changed:
  description: Whether O(own_file) was (in check mode, would be) written.
  returned: always
  type: bool
  sample: false
undecodable_files:
  description: C(*.conf) files that are not UTF-8 text, neither checked nor changed; look at them by hand.
  returned: always
  type: list
  elements: str
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.blackwell.gpu_node.plugins.module_utils._cuda.linker import (
    OWN_FILE_MODE,
    classify,
    option_problems,
    own_file_needs_writing,
    own_file_problem,
    read_conf_files,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.files import (
    file_state,
    open_directory,
    write_atomically,
)

# The linker file the cuda role writes holds one line.
OWN_FILE_LIMIT = 64 * 1024


def main():
    module = AnsibleModule(
        argument_spec=dict(
            major=dict(type="int", required=True),
            conf_dir=dict(type="path", default="/etc/ld.so.conf.d"),
            stale=dict(type="str", choices=["disable", "report"], default="disable"),
            suffix=dict(type="str", default=".disabled-by-blackwell-gpu-node"),
            own_file=dict(type="path"),
            own_content=dict(type="str"),
        ),
        required_together=[("own_file", "own_content")],
        supports_check_mode=True,
    )
    params = module.params
    own_file, own_content = params["own_file"], params["own_content"]
    problems = option_problems(params["major"], params["suffix"])
    if own_file is not None:
        problems.extend(problem for problem in [own_file_problem(params["conf_dir"], own_file)] if problem)
    if problems:
        module.fail_json(msg="; ".join(problems))
    if not os.path.isdir(params["conf_dir"]):
        module.fail_json(msg="conf_dir=%s is not a directory" % params["conf_dir"])
    files, undecodable = read_conf_files(params["conf_dir"])
    names_before = sorted(files)
    own_before = None
    write_own = False
    if own_file is not None:
        state = file_state(own_file, OWN_FILE_LIMIT)
        own_before = state["content"] if state else ""
        write_own = own_file_needs_writing(state, own_content)
        # What the linker reads once the file is written.
        files[own_file] = own_content
        undecodable = [path for path in undecodable if path != own_file]
    for path in undecodable:
        module.warn("%s is not UTF-8 text: it was neither checked nor changed; look at it by hand." % path)
    found = classify(files, params["major"], os.path.realpath)
    disabled = []
    if params["stale"] == "disable":
        disabled = [dict(to=path + params["suffix"], **{"from": path}) for path in found["stale_files"]]
    result = dict(changed=bool(disabled) or write_own, stale_entries=found["stale_entries"], disabled=disabled,
                  mixed_files=found["mixed_files"], undecodable_files=undecodable, own_file_changed=write_own)
    result["diff"] = [dict(before_header=params["conf_dir"], after_header=params["conf_dir"],
                           before="\n".join(names_before) + "\n",
                           after="\n".join(sorted(set(files) - set(found["stale_files"] if disabled else []))) + "\n")]
    if own_file is not None:
        result["diff"].append(dict(before_header=own_file, after_header=own_file, before=own_before,
                                   after=own_content))
    if not module.check_mode:
        if write_own:
            directory = open_directory(params["conf_dir"], "conf_dir")
            try:
                write_atomically(directory, os.path.basename(own_file), own_content, OWN_FILE_MODE, owner=(0, 0))
            except OSError as exc:
                module.fail_json(msg="%s could not be written (%s); it was left as it was, and no other file was "
                                     "renamed." % (own_file, exc.strerror or exc))
            finally:
                os.close(directory)
        for rename in disabled:
            os.rename(rename["from"], rename["to"])
    module.exit_json(**result)


if __name__ == "__main__":
    main()
