# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    # The options whose default the collection's modules share (plugins/module_utils/_common/defaults.py), each
    # documented here once. A module that extends one may give the option its own description; its type and
    # default stay these.
    STATE_DIR = r"""
options:
  state_dir:
    description: The collection's state directory.
    type: path
    default: /var/lib/blackwell-gpu-node
"""

    SERVER_STATE_DIR = r"""
options:
  server_state_dir:
    description: The sglang_server module's O(blackwell.gpu_node.sglang_server#module:state_dir); only read.
    type: path
    default: /var/lib/blackwell-gpu-node
"""

    PORT = r"""
options:
  port:
    description: The SGLang server's port.
    type: int
    default: 30000
"""
