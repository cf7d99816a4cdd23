# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

from ansible.errors import AnsibleFilterError

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.platform import os_id
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.profile import StackProfileError, resolve


def stack_profile(name, profiles, custom=None):
    try:
        return resolve(name, profiles, custom)
    except StackProfileError as exc:
        raise AnsibleFilterError(str(exc))


class FilterModule(object):
    def filters(self):
        return {"stack_profile": stack_profile, "os_id": os_id}
