# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Private to the blackwell.gpu_node collection: not a public API, it may change in any release.
"""SGLang's own client, ``python -m sglang.bench_serving``, run from the stack's virtualenv as its owner.

The virtualenv's interpreter runs whatever its owner put in it (a ``.pth`` file, ``sitecustomize``, an edited
package), so it runs as that owner in an empty environment (``_common/owner.py``), never as root for a virtualenv
another user can change. It writes its result into a directory of the owner's that root made for it, and root reads
the result back through that directory's descriptor, never following a link, at most RESULT_LIMIT bytes, and only
from a file the owner wrote.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

import os

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.accounts import (
    account,
    described_user,
    user_name,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.files import FileRefused, read_regular
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.owner import (
    owner_argv,
    owner_output_directory,
    run_bounded,
    venv_owner_uid,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.text import result_text
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.benchmark import (
    BenchmarkError,
    bench_serving_argv,
    from_bench_serving_output,
)

OPTION = "venv_path"
RESULT_NAME = "result.jsonl"
# bench_serving appends one line of a few KiB per run; anything near this is not its result.
RESULT_LIMIT = 16 << 20
# What a failure shows of the client's own output: its end, where Python puts the error.
OUTPUT_TAIL = 2000


def bench_serving_metrics(venv_path, base_url, model_path, chosen, run=run_bounded):
    """The metrics of one bench_serving run of the workload chosen against base_url, the client run from
    venv_path/bin/python as the virtualenv's owner; ``run(argv)`` returns ``(rc, stdout, stderr)`` (run_bounded:
    its output, the files it writes and its time are bounded).
    InvalidOption naming venv_path when it is missing or its owner has no user; BenchmarkError when the client
    fails or leaves no result root may read."""
    owner_uid = venv_owner_uid(venv_path)
    python = os.path.join(venv_path, "bin", "python")
    # owner_argv first: it refuses an owner without a user name before anything is made for it.
    owner_argv(owner_uid, [python], OPTION)
    gid = account(user_name(owner_uid))["gid"]
    with owner_output_directory(owner_uid, gid, "blackwell-benchmark-") as (directory, directory_fd):
        argv = owner_argv(owner_uid, bench_serving_argv(python, base_url, model_path, chosen,
                                                        os.path.join(directory, RESULT_NAME)), OPTION)
        rc, stdout, stderr = run(argv)
        if rc != 0:
            raise BenchmarkError("sglang.bench_serving failed (exit %d, run as %s): %s" % (
                rc, described_user(owner_uid), result_text((stderr or stdout)[-OUTPUT_TAIL:].strip())))
        try:
            found = read_regular(RESULT_NAME, RESULT_LIMIT, dir_fd=directory_fd)
        except FileRefused as exc:
            raise BenchmarkError("the result of sglang.bench_serving is not read: %s" % exc)
        if found is None:
            raise BenchmarkError("sglang.bench_serving ended without writing its result (--output-file)")
        if found["uid"] != owner_uid:
            raise BenchmarkError("the result of sglang.bench_serving belongs to %s, not to %s who ran it: it is "
                                 "not the file the client wrote" % (described_user(found["uid"]),
                                                                    described_user(owner_uid)))
        return from_bench_serving_output(found["data"])
