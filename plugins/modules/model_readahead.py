#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: model_readahead
short_description: Read a model's files into the page cache before its server restarts (internal)
version_added: 0.1.0
author:
  - Blackwell GPU node maintainers (@blackwell-gpu-node)
description:
  - Internal to C(blackwell.gpu_node.upgrade) and C(blackwell.gpu_node.serve), which call it; not meant for playbooks
    of your own.
  - For a large model, reading the weights is most of a restart. This module reads the files SGLang will load from
    the model directory O(path) into the page cache while the running server still serves, so that the restart
    after it loads them from memory. It only warms the page cache - it changes no file, and C(changed) is always
    false.
  - It reads what SGLang's loader (default load format) reads, from the directory itself and never below it - the
    configuration, tokenizer and other small files (C(*.json), C(*.jinja), C(*.model), C(*.tiktoken), C(*.txt),
    C(*.py), C(*.vocab)) first, then the weights - the C(*.safetensors) files (only those
    C(model.safetensors.index.json) names, when there is one), else the C(*.bin) files, else the C(*.pt) files
    (both without training files such as C(optimizer.pt)), else the C(*.gguf) files - in name order, the order
    SGLang loads them in. Other weight files are passed over, with the reason.
  - A link is followed only to a regular file inside the model's tree - the model directory, or for a Hugging Face
    cache snapshot (C(.../models--<org>--<name>/snapshots/<revision>)) its repository folder, where the snapshot's
    links lead into C(blobs/). A link out of the tree, a link to a link or to a directory, a FIFO, a socket and a
    device are passed over, named with the reason, and never opened. A file is opened without following a link
    and read only when C(fstat) says it is a regular file.
  - The reads stop at a bound - O(share) of the host's MemAvailable before any read, or O(max_bytes) when that is
    smaller - counted in bytes that were not in the page cache yet. Files are taken in load order up to the first
    that does not fit; it and the files after it are left out, with the reason. A file fully in the page cache
    already is not read again.
  - While it reads, MemAvailable is read again at each file and every GiB; when it falls below what the bound
    leaves to the host (the other 1 - O(share) of it), the reads stop. They stop too at O(timeout) seconds from the
    module's start, in the middle of a file if need be.
  - How much of each file is in the page cache is asked from the kernel (mincore) before and after, without reading
    it; where that cannot be asked (no ctypes), it is null, and every file counts at its full size.
extends_documentation_fragment:
  - blackwell.gpu_node.attributes
attributes:
  check_mode:
    support: full
    details: In check mode it lists, measures and plans, and reads nothing.
  diff_mode:
    support: none
  platform:
    support: full
    platforms: posix
options:
  path:
    description:
      - The model directory, SGLang's C(--model-path), absolute; links on the way to it are resolved once.
      - A Hugging Face hub id is no directory; the playbooks call this module only for a local directory.
    type: path
    required: true
  share:
    description:
      - The fraction of the host's MemAvailable, read before any read, that read-ahead may fill with pages that were
        not in the page cache yet; more than 0 and at most 0.9.
      - The rest stays to the running server and the host.
    type: float
    default: 0.5
  max_bytes:
    description: At most this many bytes brought into the page cache, whatever O(share) allows; no cap when not given.
    type: int
  timeout:
    description: Seconds from the module's start after which no read goes on; the files after it are not reached.
    type: int
    default: 600
notes:
  - Needs Linux (C(/proc/meminfo), C(posix_fadvise)).
  - What is warm stays warm only while the host's memory allows; the kernel drops clean pages first when memory is
    short, so read ahead just before the restart.
seealso:
  - module: blackwell.gpu_node.sglang_server
"""

EXAMPLES = r"""
- name: Read the model into the page cache before the server restarts
  blackwell.gpu_node.model_readahead:
    path: /shared/kimi-k2.5-int4
    share: 0.5
    timeout: 900
  register: readahead

- name: Report how much of the model was warm
  ansible.builtin.debug:
    msg: "{{ readahead.summary }}"
"""

RETURN = r"""
summary:
  description: One line - what was read, how fast, how much of what SGLang loads was warm before and after, and why
    the reads stopped early or left files out.
  returned: always
  type: str
  sample: >-
    Read 601.20 GB of 64 files into the page cache in 291.4 s (2.06 GB/s); of the 601.23 GB SGLang loads, 0.03 GB
    were warm before, 601.23 GB after
path:
  description: The model directory, links resolved.
  returned: always
  type: str
tree:
  description: The tree the directory's links may lead into - the directory itself, or a Hugging Face cache snapshot's
    repository folder.
  returned: always
  type: str
format:
  description: The suffix of the weights SGLang loads (V(.safetensors), V(.bin), V(.pt), V(.gguf)); null when the
    directory holds none.
  returned: always
  type: str
files:
  description:
    - The files read (or, in check mode, to read), in load order. Each has C(name), C(target) (a link's text, null
      for a file), C(kind) (V(config) or V(weights)), C(size), C(resident_before) and C(resident_after) (bytes in the
      page cache; null when unknown, C(resident_after) null in check mode), C(read) (bytes), C(seconds) and
      C(status).
    - C(status) is V(read); V(resident) (all of it was in the page cache, not read); V(cut) (read in part when the
      reads stopped); V(not reached); V(failed), with a C(reason); V(planned) in check mode.
  returned: always
  type: list
  elements: dict
left_out:
  description: The files over the bound - C(name), C(size), C(resident_before) and C(reason).
  returned: always
  type: list
  elements: dict
passed_over:
  description: The files SGLang does not load or read-ahead does not open - C(name), C(size) (null when not looked
    at) and C(reason) (another weight format, not in the index, a training file, a link out of the tree, not a
    regular file, the same file as another).
  returned: always
  type: list
  elements: dict
total_bytes:
  description: The size of the files SGLang loads that read-ahead may read (those read and those left out).
  returned: always
  type: int
planned_bytes:
  description: The size of the files within the bound.
  returned: always
  type: int
cost_bytes:
  description: Of those, the bytes that were not in the page cache.
  returned: always
  type: int
read_bytes:
  description: The bytes read.
  returned: always
  type: int
read_seconds:
  description: The time the reads took.
  returned: always
  type: float
seconds:
  description: The time the whole module took, listing and measuring included.
  returned: always
  type: float
gbps:
  description: C(read_bytes) over C(read_seconds), in GB (10^9 bytes) a second.
  returned: always
  type: float
warm_before_bytes:
  description: The bytes of the files SGLang loads that were in the page cache before; null when unknown.
  returned: always
  type: int
warm_after_bytes:
  description: The same after the reads (the files left out counted as they were before); null in check mode or when
    unknown.
  returned: always
  type: int
resident_measured:
  description: Whether the kernel told how much of each file was in the page cache.
  returned: always
  type: bool
share:
  description: O(share).
  returned: always
  type: float
max_bytes:
  description: O(max_bytes).
  returned: always
  type: int
bound_bytes:
  description: The bound in bytes brought into the page cache.
  returned: always
  type: int
bound_by:
  description: What set the bound - V(share) or V(max_bytes).
  returned: always
  type: str
mem_available_before:
  description: The host's MemAvailable in bytes before any read.
  returned: always
  type: int
mem_available_after:
  description: The host's MemAvailable in bytes at the end.
  returned: always
  type: int
mem_available_low:
  description: The MemAvailable that stopped the reads; null when it did not.
  returned: always
  type: int
timeout:
  description: O(timeout).
  returned: always
  type: int
stopped:
  description: Why the reads stopped before the end - V(deadline) or V(memory); null when they did not.
  returned: always
  type: str
deadline_cut:
  description: Whether the deadline stopped the reads.
  returned: always
  type: bool
check_mode:
  description: Whether it ran in check mode (and read nothing).
  returned: always
  type: bool
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.errors import InvalidOption
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.readahead import read_ahead

MAX_SHARE = 0.9


def check_options(params):
    """InvalidOption naming the first option out of its range and the fix."""
    share, max_bytes, timeout = params["share"], params["max_bytes"], params["timeout"]
    if not 0 < share <= MAX_SHARE:
        raise InvalidOption("share=%s: give the fraction of MemAvailable read-ahead may fill, more than 0 and at most "
                            "%s (0.5 by default); the rest stays to the running server and the host" % (share, MAX_SHARE))
    if max_bytes is not None and max_bytes < 1:
        raise InvalidOption("max_bytes=%d: give a positive number of bytes, or leave max_bytes out for no cap beyond "
                            "share" % max_bytes)
    if timeout < 1:
        raise InvalidOption("timeout=%d: give at least 1 second" % timeout)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            share=dict(type="float", default=0.5),
            max_bytes=dict(type="int"),
            timeout=dict(type="int", default=600),
        ),
        supports_check_mode=True,
    )
    params = module.params
    try:
        check_options(params)
        result = read_ahead(params["path"], params["share"], params["max_bytes"], params["timeout"], module.check_mode)
    except InvalidOption as exc:
        module.fail_json(msg=str(exc), changed=False)
    except OSError as exc:
        module.fail_json(msg="path=%s could not be read: %s" % (params["path"], exc.strerror or exc), changed=False)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
