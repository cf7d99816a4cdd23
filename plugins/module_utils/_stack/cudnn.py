# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Private to the blackwell.gpu_node collection: not a public API, it may change in any release.
"""Whether a profile's virtualenv passes SGLang's cuDNN check, read from the distributions installed there. Pure, so
that each case is tested.

SGLang (its ServerArgs.check_torch_2_9_1_cudnn_compatibility) refuses to serve a multimodal model on torch 2.9.1 with
a cuDNN older than 9.15, where torch's nn.Conv3d is slow and takes excess memory: "CRITICAL WARNING: PyTorch 2.9.1 &
CuDNN Compatibility Issue Detected". torch takes cuDNN from the nvidia-cudnn-cu<major> wheel beside it (2.9.1+cu130
requires nvidia-cudnn-cu13 9.13.0.50, 2.9.1 for CUDA 12.8 nvidia-cudnn-cu12 9.10.2.21); that wheel at 9.15 or newer
passes the check by itself. Nothing of this can be seen before the virtualenv exists: torch is not installed yet.
The ml_stack role says it as a note of its verification (ml_stack_report.notes), not a failure: the runtime_env role
sets SGLANG_DISABLE_CUDNN_CHECK=1 by default, and the reference profile cu130 runs torch 2.9.1 with cuDNN 9.13.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

import re

from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.adopt_torch import public_version
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.lock import normalized

# The torch release SGLang checks, and the first cuDNN it accepts there.
CHECKED_TORCH = "2.9.1"
FIXED_CUDNN = (9, 15)
RELEASE = re.compile(r"([0-9]+)\.([0-9]+)")


def cudnn_distribution(torch_cuda):
    """The cuDNN wheel torch built for CUDA torch_cuda (13.0) loads: nvidia-cudnn-cu13."""
    return "nvidia-cudnn-cu%s" % torch_cuda.split(".", 1)[0]


def cudnn_check(profile):
    """What cudnn_problem weighs a virtualenv of the profile against, or None where SGLang does not check the
    profile's torch: {"profile", "torch" (its version), "distribution" (the cuDNN wheel it loads)}, plain data that
    the ml_stack plan carries."""
    torch = profile["python"]["torch"]
    if public_version(torch["version"]) != CHECKED_TORCH:
        return None
    return {"profile": profile["name"], "torch": torch["version"], "distribution": cudnn_distribution(torch["cuda"])}


def cudnn_problem(check, installed):
    """Why SGLang refuses a virtualenv for multimodal models, or None: the check (cudnn_check's) is None, or the
    cuDNN wheel installed beside torch is 9.15 or newer.

    installed: {distribution: version} of the virtualenv, as its importlib.metadata reads them (an adopted torch's
    tree included)."""
    if check is None:
        return None
    name = check["distribution"]
    found = dict((normalized(distribution), version) for distribution, version in installed.items()).get(name)
    release = RELEASE.match(found or "")
    if release and (int(release.group(1)), int(release.group(2))) >= FIXED_CUDNN:
        return None
    return ("torch %s of stack profile %s (stack_profiles.%s.python.torch.version) has %s: SGLang refuses to serve a "
            "multimodal model on torch 2.9.1 with a cuDNN older than 9.15, where nn.Conv3d is slow and takes excess "
            "memory, unless SGLANG_DISABLE_CUDNN_CHECK=1 is set (runtime_env_sglang_disable_cudnn_check: true, the "
            "runtime_env role's default, silences the check, not the cause) or %s 9.15 or newer is installed (a "
            "custom stack profile, or its lock, that has it)"
            % (check["torch"], check["profile"], check["profile"],
               "%s %s" % (name, found) if found else "no %s" % name, name))
