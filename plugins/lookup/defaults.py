# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: defaults
author: Blackwell GPU node maintainers (@blackwell-gpu-node)
version_added: 0.1.0
short_description: A default the collection's modules share, for a role or playbook that must build on it (internal)
description:
  - Internal to C(blackwell.gpu_node.cuda), C(blackwell.gpu_node.gateway), C(blackwell.gpu_node.preflight),
    C(blackwell.gpu_node.benchmark), C(blackwell.gpu_node.diagnose), C(blackwell.gpu_node.health),
    C(blackwell.gpu_node.serve), C(blackwell.gpu_node.upgrade) and C(blackwell.gpu_node.validate), which call it;
    not meant for playbooks of your own.
  - The value each term names, as the modules take it by default - V(server_port), the SGLang server's port
    (O(blackwell.gpu_node.sglang_server#module:port)); V(state_dir), the collection's state directory
    (O(blackwell.gpu_node.sglang_server#module:state_dir)).
  - A task that only passes the value on to a module leaves the option out instead, so that the module's default
    applies.
options:
  _terms:
    description: The names of the defaults.
    type: list
    elements: str
    required: true
"""

EXAMPLES = r"""
- name: Build the server's URL on its port, the inventory's or the default
  ansible.builtin.set_fact:
    server_url: "http://127.0.0.1:{{ sglang_server_port | default(lookup('blackwell.gpu_node.defaults', 'server_port')) }}"
"""

RETURN = r"""
_raw:
  description: The value of each term, in order.
  type: list
  elements: raw
"""

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.defaults import SERVER_PORT, STATE_DIR

DEFAULTS = dict(server_port=SERVER_PORT, state_dir=STATE_DIR)


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        unknown = [term for term in terms if term not in DEFAULTS]
        if unknown or not terms:
            raise AnsibleLookupError("defaults: name one of %s, not %s"
                                     % (", ".join(sorted(DEFAULTS)), ", ".join(map(repr, unknown)) or "none"))
        return [DEFAULTS[term] for term in terms]
