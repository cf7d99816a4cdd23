# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Private to the blackwell.gpu_node collection: not a public API, it may change in any release.
"""The values that the collection's modules, roles and playbooks share, each defined here once.

Every module's argument_spec and every core reads them from here; the documentation states them once, in the
doc fragment blackwell.gpu_node.defaults; roles and playbooks read them through the lookup
blackwell.gpu_node.defaults, or leave a module's option out so that its default applies. The sglang_server role's
defaults state them for the user (sglang_server_port, sglang_server_state_dir).
tests/unit/plugins/module_utils/test_common_defaults.py fails on another copy and on a documented default that
differs.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

# The port an SGLang server listens on: SGLang's own default (`--port`), which the sglang_server module keeps.
SERVER_PORT = 30000
# Where the collection keeps the server's pid and state files, node snapshots and an upgrade's progress; root's at
# every level and writable by root alone.
STATE_DIR = "/var/lib/blackwell-gpu-node"
