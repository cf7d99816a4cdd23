# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

from ansible.errors import AnsibleFilterError

from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.lock import LockError, read
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.ml_stack import profile_versions


def stack_lock(text, profile, path):
    try:
        return read(text, path, profile, profile_versions(profile))
    except LockError as exc:
        raise AnsibleFilterError(str(exc))


class FilterModule(object):
    def filters(self):
        return {"stack_lock": stack_lock}
