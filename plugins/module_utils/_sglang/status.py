# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Private to the blackwell.gpu_node collection: not a public API, it may change in any release.
"""The recorded server as the sglang_server and sglang_server_info modules see it before anything else: one
reader, so that what the info module reports is what sglang_server recognises as its own."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

import os

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.accounts import user_name
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.defaults import SERVER_PORT, STATE_DIR
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.detached import relaunch_reasons
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.files import foreign_writable, path_kind
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.processes import process_uid
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.secrets import SECRET_FLAGS, masked_argv
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.instance import Instance, observe_recorded
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.options import (
    name_problems,
    port_state,
    secret_flag_problems,
    text_problems,
)

# The options that locate and mask the recorded server, and the port it is asked about; sglang_server adds what
# launching and stopping need.
READ_OPTIONS = dict(
    name=dict(type="str", default="sglang"),
    state_dir=dict(type="path", default=STATE_DIR),
    host=dict(type="str", default="127.0.0.1"),
    port=dict(type="int", default=SERVER_PORT),
    secret_flags=dict(type="list", elements="str", default=[], no_log=False),
)


def read_problems(params):
    """Problems with the options that READ_OPTIONS declares (and any other that reaches a command line), before
    anything is read."""
    return name_problems(params) + text_problems(params) + secret_flag_problems(params["secret_flags"])


class Recorded(object):
    """The server recorded under the options name and state_dir: its state (None when none is recorded), whether
    it runs, and what systemd says of its unit (None unless systemd runs it). BadState, InvalidOption or
    SystemdFailed when the state cannot be trusted or systemd not asked."""

    def __init__(self, module):
        params = module.params
        self.instance = Instance(params["state_dir"], params["name"])
        self.state, self.running, self.unit_state = observe_recorded(module, self.instance)
        self.secret_flags = SECRET_FLAGS + tuple(params["secret_flags"])
        # The flags of the recorded launch still mask its command line when this run names fewer.
        self.shown_flags = self.secret_flags + tuple((self.state or {}).get("secret_flags", ()))

    def result(self):
        """What every result says of it: whether it runs, its command line (secrets masked) and log, and its pid
        and log offset, or the pid of a server that is gone."""
        result = dict(changed=False, running=self.running)
        if self.state:
            result.update(argv=masked_argv(self.state["argv"], self.shown_flags), log_path=self.state["log_path"])
            if self.running:
                result.update(pid=self.state["pid"], offset=self.state["offset"])
            else:
                result["stale_pid"] = self.state["pid"]
        return result

    def status(self, host, port):
        """What validate checks beyond result(): who holds host:port, and of a recorded server, who it runs as,
        whether its unit is enabled, how often systemd restarted it, and who can write to the virtualenv it runs
        from. InvalidOption when host does not resolve to an address of this host."""
        details = {"port_state": port_state(self.state, self.running, host, port)}
        if not self.state:
            return details
        details.update(manager=self.state.get("manager", "module"),
                       expected_user=(self.state.get("identity") or {}).get("user") or "root")
        if self.running:
            uid = process_uid(self.state["pid"])
            details["user"] = (user_name(uid) or str(uid)) if uid is not None else None
        unit_state = self.unit_state
        if unit_state is not None:
            details.update(unit=self.state["unit"], unit_enabled=unit_state["enabled"],
                           restarts=unit_state["restarts"], active_state=unit_state["active_state"],
                           sub_state=unit_state["sub_state"])
        venv = os.path.dirname(os.path.dirname(self.state["argv"][0]))
        if path_kind(venv) == "directory":
            owner, problems, complete = foreign_writable(venv)
            details["venv"] = dict(path=venv, owner=user_name(owner) or str(owner), writable_by_others=problems,
                                   complete=complete)
        return details


def _account(identity):
    """user:group of a recorded identity, root's where a field is unset."""
    identity = identity if isinstance(identity, dict) else {}
    return "%s:%s" % (identity.get("user") or "root", identity.get("group") or "root")


def restart_reasons(recorded, wanted, unit_state=None, installed_unit=None, installed_secret_env=None):
    """Why the recorded server, which runs, is not the one this run asks for; empty when it is.

    recorded: its state. wanted: this run's argv, env_digest, manager, identity, log_path, unit_dir (its
    systemd_unit_dir), unit_text and secret_env_text (None unless manager=systemd). unit_state: what systemd says
    of the recorded unit, given when systemd runs it; installed_unit and installed_secret_env: functions that read
    the text of its unit file and of its secret environment file (None when missing), called only when the unit
    is where this run would write it. Besides relaunch_reasons': who it runs as, under which manager, where its
    unit lives, and the files systemd starts it from.
    """
    reasons = relaunch_reasons(recorded, wanted["argv"], wanted["env_digest"], wanted["log_path"])
    manager = recorded.get("manager", "module")
    if manager != wanted["manager"]:
        reasons.append("it runs under manager=%s, not %s" % (manager, wanted["manager"]))
    # A server recorded before the module had a user (root, no identity) is told apart by that alone.
    running_as = recorded.get("identity", {"user": None, "group": None})
    if running_as != wanted["identity"]:
        reasons.append("it runs as %s, not %s" % (_account(running_as), _account(wanted["identity"])))
    if manager == "systemd" and wanted["manager"] == "systemd":
        unit_dir = recorded.get("unit_dir") or wanted["unit_dir"]
        if unit_dir != wanted["unit_dir"]:
            reasons.append("its unit is in %s, not systemd_unit_dir=%s" % (unit_dir, wanted["unit_dir"]))
        elif unit_state is not None and not unit_state["enabled"]:
            reasons.append("its unit %s is disabled" % recorded["unit"])
        elif unit_state is not None and installed_unit() != wanted["unit_text"]:
            # An edit by hand, or another setting of this module.
            reasons.append("its unit file %s is not the one these options write" % recorded["unit"])
        elif unit_state is not None and installed_secret_env() != wanted["secret_env_text"]:
            # Root's alone, so edited by hand: systemd would give the server those values at its next start.
            reasons.append("its secret environment file is not the one these options write")
    return reasons
