# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

from ansible.errors import AnsibleFilterError

from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.adopt_torch import (
    decide,
    inspected_state,
    levels,
    looked_at,
    parse_inside,
    torch_from_problems,
)


def ml_stack_torch_from_problems(torch_from):
    return torch_from_problems(torch_from)


def ml_stack_adopt_levels(torch_from, inspection):
    try:
        return levels(looked_at(torch_from, inspected_state(inspection["rc"], inspection["stdout"],
                                                            inspection["stderr"])))
    except (KeyError, TypeError) as exc:
        raise AnsibleFilterError("ml_stack_adopt_levels: incomplete input, %s: %s" % (type(exc).__name__, exc))


def ml_stack_adopt_torch(observed, profile, python_version):
    try:
        report = inspected_state(observed["inspection"]["rc"], observed["inspection"]["stdout"],
                                 observed["inspection"]["stderr"])
        inside = parse_inside(observed["inside"]["rc"], observed["inside"]["stdout"], observed["inside"]["stderr"])
        return decide(profile, observed["torch_from"], report, observed["levels"], inside, python_version)
    except (KeyError, TypeError, ValueError) as exc:
        raise AnsibleFilterError("ml_stack_adopt_torch: incomplete input, %s: %s" % (type(exc).__name__, exc))


class FilterModule(object):
    def filters(self):
        return {
            "ml_stack_torch_from_problems": ml_stack_torch_from_problems,
            "ml_stack_adopt_levels": ml_stack_adopt_levels,
            "ml_stack_adopt_torch": ml_stack_adopt_torch,
        }
