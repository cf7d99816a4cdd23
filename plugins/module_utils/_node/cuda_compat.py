# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Private to the blackwell.gpu_node collection: not a public API, it may change in any release.
"""Whether CUDA's forward-compatibility libraries (NVIDIA's cuda-compat-<major>-<minor> package, a libcuda.so.1 of
another driver release) belong on a host's loader path. Pure, so that each case is tested.

The collection installs no cuda-compat package; hosts get one from elsewhere (NVIDIA's repository offers it beside
the toolkit, container images ship it). Its libcuda serves a driver older than the toolkit needs. On a host whose
driver is new enough, a process that loads it instead of the driver's own fails with CUDA error 803,
cudaErrorSystemDriverMismatch ("a mismatch between the versions of the display driver and the CUDA driver").
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

import re

# The driver each CUDA release needs: "CUDA Toolkit and Corresponding Driver Versions" (Table 3 of NVIDIA's CUDA
# Toolkit Release Notes, https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html, the Linux column; the
# x86_64 and sbsa drivers share their versions). A release X.Y.Z is "CUDA X.Y Update Z" there: CUDA 13.0 GA needs
# 580.65.06, 13.0 Update 1 580.82.07, 12.8 Update 1 570.124.06. Within a major release a driver of the same family
# runs an application with a limited feature set (minor version compatibility, CUDA 13.x from 580, 12.x from 525,
# https://docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html); the compatibility libraries
# are for a driver older than this table's.
TOOLKIT_DRIVER = {
    "13.2.2": "595.71.05",
    "13.2.1": "595.58.03",
    "13.2.0": "595.45.04",
    "13.1.1": "590.48.01",
    "13.1.0": "590.44.01",
    "13.0.2": "580.95.05",
    "13.0.1": "580.82.07",
    "13.0.0": "580.65.06",
    "12.9.1": "575.57.08",
    "12.9.0": "575.51.03",
    "12.8.1": "570.124.06",
    "12.8.0": "570.26",
    "12.6.3": "560.35.05",
    "12.6.2": "560.35.03",
    "12.6.1": "560.35.03",
    "12.6.0": "560.28.03",
    "12.5.1": "555.42.06",
    "12.5.0": "555.42.02",
    "12.4.1": "550.54.15",
    "12.4.0": "550.54.14",
}

# ASCII digits only: \d would read "５８０" as a driver branch.
DRIVER_VERSION = re.compile(r"[0-9]{1,6}(\.[0-9]{1,6}){1,3}")


def driver_numbers(version):
    """(580, 95, 5) from 580.95.05; None for anything that is not a driver version."""
    if not isinstance(version, str) or not DRIVER_VERSION.fullmatch(version):
        return None
    return tuple(int(part) for part in version.split("."))


def compat_wanted(driver_version, cuda_version):
    """Whether the compatibility libraries of CUDA cuda_version (the stack profile's cuda.version, like 13.0.1) may
    stand in for the driver's own libcuda: only where driver_version is older than the driver that release needs.

    Returns {"wanted": True, False, or None when either version is unknown here, "minimum": the driver the release
    needs, or None}."""
    minimum = TOOLKIT_DRIVER.get(cuda_version)
    driver, needed = driver_numbers(driver_version), driver_numbers(minimum)
    if driver is None or needed is None:
        return {"wanted": None, "minimum": minimum}
    return {"wanted": driver < needed, "minimum": minimum}
