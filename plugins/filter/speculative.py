# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.speculative import from_argv, problems


def speculative_problems(settings, prefix):
    return problems(settings, prefix)


def speculative_settings(argv):
    return from_argv(argv)


class FilterModule(object):
    def filters(self):
        return {"speculative_problems": speculative_problems, "speculative_settings": speculative_settings}
