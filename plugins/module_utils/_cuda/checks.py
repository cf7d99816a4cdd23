# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Private to the blackwell.gpu_node collection: not a public API, it may change in any release.
"""The cuda role's checks before it changes a host: a cuda_home that can be written into the linker's
configuration and a login shell profile, and a repository keyring that holds exactly the pinned key.

Pure Python, no Ansible imports: the role's filter plugin is a thin shell over these functions, and the unit
tests import this module directly.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

import re

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.text import control_character_problem

# ldconfig splits ld.so.conf lines at whitespace, ':' and ',' and ends them at '#'.
LINKER_SEPARATORS = re.compile(r"[\s:,#]")


def cuda_home_problems(cuda_home, series):
    """What keeps cuda_home out of ld.so.conf.d and /etc/profile.d, each naming the variable and the fix."""
    problem = control_character_problem(cuda_home, "cuda_home")
    if problem:
        return [problem]
    problems = []
    if not isinstance(cuda_home, str) or not cuda_home.startswith("/"):
        problems.append("cuda_home=%s is not an absolute path; NVIDIA's packages install CUDA %s into "
                        "/usr/local/cuda-%s" % (cuda_home, series, series))
    elif LINKER_SEPARATORS.search(cuda_home):
        problems.append("cuda_home=%s holds whitespace, ':', ',' or '#', which ld.so.conf takes for the end of an "
                        "entry; use a path without them (NVIDIA's is /usr/local/cuda-%s)" % (cuda_home, series))
    return problems


def primary_fingerprints(colons):
    """The fingerprints of the primary keys in `gpg --show-keys --with-colons` output: each `fpr` record that
    follows a `pub` record (those after `sub` are subkeys, part of their primary key)."""
    fingerprints = []
    record = None
    for line in (colons or "").splitlines():
        fields = line.split(":")
        if fields[0] == "fpr" and record == "pub" and len(fields) > 9:
            fingerprints.append(fields[9].upper())
        if fields[0] != "fpr":
            record = fields[0]
    return fingerprints


def repository_key_problems(colons, pinned, url):
    """Why the keyring at url must not be trusted: not the pinned key, or the pinned key with others beside it
    (apt trusts every key of a signed-by keyring). Empty when it holds exactly the pinned key."""
    pinned = re.sub(r"\s+", "", pinned or "").upper()
    found = primary_fingerprints(colons)
    if pinned not in found:
        return ["The key at %s has the fingerprint(s) %s, not cuda_repo_key_fingerprint=%s. If NVIDIA rotated its "
                "key, check the new one and set cuda_repo_key_fingerprint" % (url, ", ".join(found) or "none", pinned)]
    others = [fingerprint for fingerprint in found if fingerprint != pinned]
    if others:
        return ["The keyring at %s holds other keys besides cuda_repo_key_fingerprint=%s: %s. apt would trust each "
                "key of it for NVIDIA's repository; only the pinned one may be. Have the mirror serve NVIDIA's keyring "
                "as it is" % (url, pinned, ", ".join(others))]
    return []
