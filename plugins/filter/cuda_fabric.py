# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

from ansible_collections.blackwell.gpu_node.plugins.module_utils._cuda.driver import parse_installed, parse_madison
from ansible_collections.blackwell.gpu_node.plugins.module_utils._cuda.fabric import (
    INSTALLED_PATTERNS,
    decision,
    plan,
    query_names,
)


def cuda_fabric_decision(setting, gpu, dpkg_query_output):
    return decision(setting, gpu, parse_installed(dpkg_query_output))


def cuda_fabric_plan(setting, gpu, dpkg_query_output, apt_cache_madison_output):
    return plan(setting, gpu, parse_installed(dpkg_query_output), parse_madison(apt_cache_madison_output))


def cuda_fabric_packages(branch):
    return dict(installed=list(INSTALLED_PATTERNS), available=query_names(int(branch)))


class FilterModule(object):
    def filters(self):
        return {
            "cuda_fabric_decision": cuda_fabric_decision,
            "cuda_fabric_plan": cuda_fabric_plan,
            "cuda_fabric_packages": cuda_fabric_packages,
        }
