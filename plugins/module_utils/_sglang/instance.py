# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Private to the blackwell.gpu_node collection: not a public API, it may change in any release.
"""The state files of one named server: what was launched, whether it still runs."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

import json
import os

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.detached import (
    STATE_MODE,
    StateRefused,
    Tracked,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.files import (
    path_kind,
    read_text,
    write_atomically,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.secrets import SECRET_FLAGS, secret_values
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.systemd import UNIT_PROPERTIES, unit_status

# How many launches <name>.launches.json keeps, newest first: enough to look at a crash a few restarts back.
LAUNCH_HISTORY = 5

# What a launch's entry holds: where its log begins, and the process it was (start time in clock ticks since
# boot, the boot it ran in), which dates it against the kernel's log.
LAUNCH_FIELDS = ("pid", "start_time", "offset", "log_path", "started_at", "boot_id")
# What the readiness gate judges a launch's start by (capacity.py), where the launch recorded it: the digest of its
# command line and the processes that held GPU memory when it was launched.
LAUNCH_CAPACITY_FIELDS = ("argv_digest", "gpu_holders")
# What masking the launch's log needs beyond SGLang's own secret flags, when the launch had any: its secret
# flags and the secrets its log may show (its command line's and secret_env's values). Only this root-only file
# keeps them once the state file is gone; no result shows them.
LAUNCH_MASK_FIELDS = ("secret_flags", "secret_values")


class BadState(StateRefused):
    """A state file that this module cannot trust; its message names the file and what to do."""


class SystemdFailed(RuntimeError):
    pass


def systemctl(module, *args, **kwargs):
    """Run systemctl; SystemdFailed when it fails, unless check=False."""
    command = [module.get_bin_path("systemctl", required=True)] + list(args)
    rc, out, err = module.run_command(command)
    if rc != 0 and kwargs.get("check", True):
        raise SystemdFailed("%s failed (%d): %s" % (" ".join(command), rc, (err or out).strip()))
    return out


def observe_unit(module, unit):
    """What systemd says of the unit, in one call: under systemd the unit, not a pid, is the server."""
    return unit_status(systemctl(module, "show", "--property=" + ",".join(UNIT_PROPERTIES), unit))


def observe_recorded(module, instance):
    """(recorded state or None, whether that server runs, what systemd says of its unit or None). BadState,
    InvalidOption or SystemdFailed when the state cannot be trusted or systemd not asked."""
    recorded = instance.load()
    if recorded and recorded.get("manager") == "systemd":
        # Restarts by systemd, a reboot or `systemctl restart` give the unit another main pid: it is
        # still the same server.
        unit_state = observe_unit(module, recorded["unit"])
        recorded["pid"] = unit_state["pid"] or recorded["pid"]
        return recorded, unit_state["running"], unit_state
    return recorded, bool(recorded) and instance.running(recorded), None


class Instance(Tracked):
    """The pid and state files of one named server, in state_dir (never written through a link), its secret
    environment file and its launch history.

    SGLang retitles its child processes (`sglang::scheduler...`), not the process it was launched as, so the
    main process's command line must be the recorded argv; a `sglang::` title is accepted too, should a version
    retitle it."""

    writer = "sglang_server"
    what = "server"
    error = BadState
    retitles = ("sglang::",)

    def __init__(self, state_dir, name):
        super(Instance, self).__init__(state_dir, name)
        self.secret_env_name = name + ".secret.env"
        self.secret_env_path = os.path.join(state_dir, self.secret_env_name)
        # Kept when the server is stopped or forgotten: a crash is looked at after the next run cleaned up.
        self.launches_name = name + ".launches.json"
        self.launches_path = os.path.join(state_dir, self.launches_name)
        # The last good launch of each command line, which the readiness gate compares a start with; kept as the
        # launch history is.
        self.capacity_name = name + ".capacity.json"

    def files(self):
        """The pid, state and secret environment files: what forget() removes."""
        return super(Instance, self).files() + [self.secret_env_name]

    def kept_files(self):
        """The files of files(), the launch history and the last good launches, which forget() keeps."""
        return self.files() + [self.launches_name, self.capacity_name]

    def _read_json(self, name, empty):
        """The JSON value of the state file name, empty when there is none or it is not JSON."""
        if path_kind(self.state_dir) != "directory":
            return empty
        directory = self.directory()
        try:
            text = read_text(directory, name)
        finally:
            os.close(directory)
        try:
            value = json.loads(text) if text else empty
        except ValueError:
            return empty
        return value if isinstance(value, type(empty)) else empty

    def _write_json(self, name, value):
        directory = self.directory(create=True)
        try:
            write_atomically(directory, name, json.dumps(value, indent=2, sort_keys=True), STATE_MODE)
        finally:
            os.close(directory)

    def launches(self):
        """The recorded launches, newest first; [] when there are none. An entry that is not a launch (a file
        edited by hand, cut off) is left out rather than trusted: nothing is signalled from this history."""
        entries = self._read_json(self.launches_name, [])
        return [entry for entry in entries if launch_problem(entry) is None][:LAUNCH_HISTORY]

    def launch_of(self, pid, offset):
        """The recorded launch of the process pid whose log began at offset, None when the history has none."""
        return next((entry for entry in self.launches() if entry["pid"] == pid and entry["offset"] == offset), None)

    def capacity_records(self):
        """<name>.capacity.json: {command digest: its last good launch}, {} when there is none. capacity.reference()
        trusts a record only as far as it is one the readiness gate writes."""
        return self._read_json(self.capacity_name, {})

    def write_capacity_records(self, records):
        self._write_json(self.capacity_name, records)

    def secret_env_text(self):
        """The secret environment file's text, None when there is none."""
        if path_kind(self.state_dir) != "directory":
            return None
        directory = self.directory()
        try:
            return read_text(directory, self.secret_env_name)
        finally:
            os.close(directory)

    def record_launch(self, state, secret_env_values=()):
        """Put the launch of state first in the history, which keeps the last LAUNCH_HISTORY, with what masks
        its log: the state's secret flags, the secrets of its command line and secret_env_values."""
        entry = dict((key, state.get(key)) for key in LAUNCH_FIELDS)
        entry.update((key, state[key]) for key in LAUNCH_CAPACITY_FIELDS if key in state)
        flags = list(state.get("secret_flags") or ())
        values = secret_values(state.get("argv") or (), SECRET_FLAGS + tuple(flags)) + list(secret_env_values)
        if flags:
            entry["secret_flags"] = flags
        if values:
            entry["secret_values"] = values
        self._write_json(self.launches_name, [entry] + self.launches()[:LAUNCH_HISTORY - 1])

    def write_secret_env(self, text):
        directory = self.directory(create=True)
        try:
            write_atomically(directory, self.secret_env_name, text, STATE_MODE)
        finally:
            os.close(directory)


def launch_problem(entry):
    """What makes an entry of the launch history unusable, or None."""
    if not isinstance(entry, dict):
        return "not an object"
    for key, kinds in (("pid", int), ("start_time", int), ("offset", int), ("log_path", str)):
        if isinstance(entry.get(key), bool) or not isinstance(entry.get(key), kinds):
            return "%s is missing or not of the right type" % key
    if entry["offset"] < 0:
        return "offset is negative"
    for key in LAUNCH_MASK_FIELDS:
        if not isinstance(entry.get(key, []), list) or not all(isinstance(word, str) for word in entry.get(key, [])):
            return "%s is not a list of strings" % key
    return None


def launch_masks(entry):
    """(secret values, secret flags) recorded with a launch; empty for an entry written before they were."""
    return list(entry.get("secret_values", [])), tuple(entry.get("secret_flags", []))


def shown_launch(entry):
    """A launch's entry as a result may show it: without what masks its log, nor the GPU holders it recorded, whose
    command lines a result shows only masked with it (capacity.judge)."""
    return dict((key, value) for key, value in entry.items() if key not in LAUNCH_MASK_FIELDS + ("gpu_holders",))
