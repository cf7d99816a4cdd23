# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Private to the blackwell.gpu_node collection: not a public API, it may change in any release.
"""Unit file syntax shared by every unit the collection writes: quoting, hardening, status."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

import re

# Exists where systemd is PID 1 (sd_booted() looks for the same directory).
SYSTEMD_RUNTIME_DIR = "/run/systemd/system"


# systemd: the same command and environment as a unit, so that systemd starts, restarts and stops it.
# Words of these characters need no quotes in ExecStart= and Environment= (fullmatch: `$` accepts a trailing newline).
SYSTEMD_PLAIN = re.compile(r"[A-Za-z0-9_@+=:,./-]+")


def systemd_quote(word, expands_variables=True):
    """One word of an ExecStart= line (expands_variables) or an Environment= assignment: `%` doubled, as
    systemd expands specifiers in both; where quotes are needed `\\` and `"` escaped (systemd unescapes C-style
    in quotes), and `$` doubled in ExecStart=, where systemd expands $VAR and ${VAR} (Environment= does not)."""
    escaped = word.replace("%", "%%")
    if SYSTEMD_PLAIN.fullmatch(word):
        return escaped
    escaped = escaped.replace("\\", "\\\\").replace('"', '\\"')
    return '"%s"' % (escaped.replace("$", "$$") if expands_variables else escaped)


def systemd_path(path):
    """A path in EnvironmentFile= or StandardOutput=append:, which take the rest of the line as it is, after
    specifier expansion."""
    return path.replace("%", "%%")


# Hardening that CUDA, NCCL and SGLang's JIT compilers work under. Left out, on purpose:
# PrivateDevices= (hides /dev/nvidia*), DevicePolicy=closed (needs a DeviceAllow= for every nvidia device, and
# nvidia-caps, nvidia-uvm appear at run time), MemoryDenyWriteExecute= (Triton and flashinfer JIT-compile into
# writable, executable memory), SystemCallFilter= (the CUDA driver and NCCL use unusual system calls) and
# ProtectHome= (the virtualenv, the model or the user's HOME may be under /home).
HARDENING = (
    "NoNewPrivileges=yes",
    "ProtectSystem=full",
    "PrivateTmp=yes",
    "ProtectKernelTunables=yes",
    "ProtectKernelModules=yes",
    "ProtectControlGroups=yes",
    "RestrictSUIDSGID=yes",
    "LockPersonality=yes",
    "RestrictRealtime=yes",
)


def environment_file(variables):
    """The text of a systemd EnvironmentFile= for variables: each value in double quotes, where systemd (like
    a POSIX shell) takes a backslash before `\\`, `"`, `$` and a backquote as keeping that character. Values
    hold no control characters (refused before), so each assignment is one line."""
    def quoted(value):
        return re.sub(r'([\\"$`])', r"\\\1", value)
    return "".join('%s="%s"\n' % (name, quoted(value)) for name, value in sorted(variables.items()))


# The unit's properties that say whether it runs, since when, and how often systemd restarted it.
UNIT_PROPERTIES = ("MainPID", "ActiveState", "SubState", "NRestarts", "UnitFileState", "LoadState",
                   "ExecMainStartTimestampMonotonic")


def unit_status(show_output):
    """What `systemctl show -p <UNIT_PROPERTIES>` says, as a dict: `pid` (0 when none), `active_state`,
    `sub_state`, `restarts`, `enabled`, `loaded`, `started_monotonic`, `running` (active with a main pid)."""
    properties = {}
    for line in show_output.splitlines():
        key, _equals, value = line.partition("=")
        properties[key.strip()] = value.strip()

    def number(key):
        value = properties.get(key, "")
        return int(value) if value.isdigit() and value.isascii() else 0

    status = {"pid": number("MainPID"), "active_state": properties.get("ActiveState", "unknown"),
              "sub_state": properties.get("SubState", "unknown"), "restarts": number("NRestarts"),
              "enabled": properties.get("UnitFileState") == "enabled",
              "loaded": properties.get("LoadState") == "loaded",
              "started_monotonic": number("ExecMainStartTimestampMonotonic")}
    status["running"] = status["active_state"] in ("active", "reloading") and status["pid"] > 0
    return status
