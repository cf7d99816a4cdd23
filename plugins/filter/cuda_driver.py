# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

from ansible_collections.blackwell.gpu_node.plugins.module_utils._cuda.driver import (
    debian_mirror_problems,
    module_state,
    parse_installed,
    parse_madison,
    plan,
)


def cuda_driver_plan(branch, packages, dpkg_query_output, apt_cache_madison_output):
    return plan(int(branch), list(packages), parse_installed(dpkg_query_output),
                parse_madison(apt_cache_madison_output))


def cuda_driver_module_state(expected_version, gpu):
    return module_state(expected_version, gpu)


class FilterModule(object):
    def filters(self):
        return {
            "cuda_driver_plan": cuda_driver_plan,
            "cuda_driver_module_state": cuda_driver_module_state,
            "cuda_debian_mirror_problems": debian_mirror_problems,
        }
