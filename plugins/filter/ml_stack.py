# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

from ansible.errors import AnsibleFilterError

from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.ml_stack import (
    build_decision,
    build_plan,
    dependencies,
    file_groups,
    prune_plan,
    verdict,
)


def ml_stack_plan(settings, profile, host, lock=None, adoption=None):
    try:
        return build_plan(settings, profile, host, lock, adoption)
    except (KeyError, TypeError) as exc:
        raise AnsibleFilterError("ml_stack_plan: incomplete input, %s: %s" % (type(exc).__name__, exc))


def ml_stack_dependencies(requires, pinned):
    return dependencies(requires, pinned)


def ml_stack_verdict(plan, observed, gpus_required=True):
    try:
        return verdict(plan, observed, gpus_required)
    except (KeyError, TypeError) as exc:
        raise AnsibleFilterError("ml_stack_verdict: incomplete input, %s: %s" % (type(exc).__name__, exc))


def ml_stack_decision(plan, venv, inspected, venv_owner):
    try:
        return build_decision(plan, venv, inspected, venv_owner)
    except (KeyError, TypeError) as exc:
        raise AnsibleFilterError("ml_stack_decision: incomplete input, %s: %s" % (type(exc).__name__, exc))


def ml_stack_prune(venv_path, candidates, keep, protected):
    return prune_plan(venv_path, candidates, keep, protected)


def ml_stack_file_groups(files):
    try:
        return file_groups(files)
    except (KeyError, TypeError) as exc:
        raise AnsibleFilterError("ml_stack_file_groups: incomplete input, %s: %s" % (type(exc).__name__, exc))


class FilterModule(object):
    def filters(self):
        return {
            "ml_stack_plan": ml_stack_plan,
            "ml_stack_dependencies": ml_stack_dependencies,
            "ml_stack_verdict": ml_stack_verdict,
            "ml_stack_decision": ml_stack_decision,
            "ml_stack_prune": ml_stack_prune,
            "ml_stack_file_groups": ml_stack_file_groups,
        }
