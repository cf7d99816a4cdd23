# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Private to the blackwell.gpu_node collection: not a public API, it may change in any release.
"""What kind of host it is: its OS as NVIDIA's repositories name it, its GPUs' family."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

import re

# Compute capability -> GPU family, as NVIDIA numbers them. Matched whole (fullmatch), in ASCII digits.
FAMILIES = (
    ("blackwell", re.compile(r"1[0-2]\.[0-9]+")),
    ("hopper", re.compile(r"9\.[0-9]+")),
    ("ada", re.compile(r"8\.9")),
    ("ampere", re.compile(r"8\.[0-7]")),
    ("turing", re.compile(r"7\.5")),
    ("volta", re.compile(r"7\.[0-2]")),
)
FAMILY_NAMES = tuple(name for name, _pattern in FAMILIES)


def family_of(compute_capability):
    for name, pattern in FAMILIES:
        if pattern.fullmatch(compute_capability or ""):
            return name
    return None


def os_id(distribution, version):
    """debian12, ubuntu2404, ...: the OS ids of NVIDIA's repositories and of the profiles, from Ansible's
    distribution and distribution_version facts."""
    distribution = (distribution or "").lower()
    if distribution == "ubuntu":
        return "ubuntu" + (version or "").replace(".", "")
    return distribution + (version or "").split(".")[0]
