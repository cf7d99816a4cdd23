# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

from ansible.errors import AnsibleFilterError

from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.runtime_env import (
    RuntimeEnvError,
    build_environment,
    files_to_render,
    module_code,
)


def runtime_environment(settings):
    try:
        return build_environment(**settings)
    except RuntimeEnvError as exc:
        raise AnsibleFilterError("Invalid runtime_env settings:\n" + str(exc))
    except TypeError as exc:
        raise AnsibleFilterError("runtime_environment: %s" % exc)


def runtime_environment_module(settings):
    return module_code(settings)


class FilterModule(object):
    def filters(self):
        return {"runtime_environment": runtime_environment, "runtime_environment_module": runtime_environment_module,
                "runtime_environment_files": files_to_render}
