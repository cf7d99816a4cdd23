# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Private to the blackwell.gpu_node collection: not a public API, it may change in any release.
"""The systemd unit and the logrotate configuration of a server. The unit's only source: the sglang_server module
writes it, not a role's template, as it is the server's identity under systemd (written with the secret file and
the state, and compared with the installed unit to decide a restart)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

import re

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.detached import PROCESS_UMASK
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.secrets import MASK, SECRET_FLAGS, masked_argv
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.systemd import (
    HARDENING,
    systemd_path,
    systemd_quote,
)

SECRET_VARIABLE = "BLACKWELL_GPU_NODE_SECRET_ARG"


def systemd_unit(name, argv, env, log_path, secret_env_path, service, secret_flags=SECRET_FLAGS, secret_env=()):
    """The unit file text and the secret environment file's variables for argv and env.

    service holds `stop_timeout`, `restart_sec`, `start_limit_interval`, `start_limit_burst` and, for a
    server that does not run as root, `user` and `group` (systemd adds the user's supplementary groups from
    the group database, and sets HOME, USER and LOGNAME itself).

    Values of secret flags, in both spellings (`--api-key KEY`, `--api-key=KEY`), move to the secret
    environment file, which only root reads, and the unit refers to them as ${...}, which systemd expands
    when it starts the service. secret_env names the variables the file also carries for the server. The unit
    requires the file whenever it holds anything (EnvironmentFile= without `-`): a missing file must stop the
    start, not start a server with `--api-key ""` or without its tokens."""
    words, secrets = [], {}
    for index, (word, shown) in enumerate(zip(argv, masked_argv(argv, secret_flags))):
        if word == shown:
            words.append(systemd_quote(word))
            continue
        variable = "%s_%d" % (SECRET_VARIABLE, index)
        flag, equals, value = word.partition("=")
        if equals and shown == flag + "=" + MASK:
            secrets[variable] = value
            words.append(systemd_quote(flag + "=") + "${%s}" % variable)
        else:
            secrets[variable] = word
            words.append("${%s}" % variable)
    lines = [
        "# Written by blackwell.gpu_node.sglang_server; changes are overwritten.",
        "[Unit]",
        "Description=SGLang server %s (blackwell.gpu_node)" % name,
        # On NVSwitch systems CUDA waits for Fabric Manager (error 802 until it runs), and every start pays the
        # driver's initialisation without the persistence daemon: a boot starts them first. After= alone orders
        # without pulling them in, so hosts without them are unaffected.
        "After=network-online.target nvidia-persistenced.service nvidia-fabricmanager.service",
        "Wants=network-online.target",
        # A server that fails again and again is given up after this many starts in this interval.
        "StartLimitIntervalSec=%d" % int(service["start_limit_interval"]),
        "StartLimitBurst=%d" % int(service["start_limit_burst"]),
        "",
        "[Service]",
        "Type=simple",
        "ExecStart=" + " ".join(words),
    ]
    lines += ["Environment=%s" % systemd_quote("%s=%s" % item, expands_variables=False)
              for item in sorted(env.items())]
    if service.get("user") is not None:
        lines += ["User=%s" % systemd_quote(service["user"]), "Group=%s" % systemd_quote(service["group"])]
    lines.append("UMask=%04o" % PROCESS_UMASK)
    if secrets or secret_env:
        lines.append("EnvironmentFile=%s" % systemd_path(secret_env_path))
    lines += [
        "StandardOutput=append:%s" % systemd_path(log_path),
        "StandardError=append:%s" % systemd_path(log_path),
        "Restart=on-failure",
        "RestartSec=%d" % int(service["restart_sec"]),
        "KillMode=control-group",
        "TimeoutStopSec=%d" % int(service["stop_timeout"]),
    ]
    lines += list(HARDENING) + [
        "",
        "[Install]",
        "WantedBy=multi-user.target",
    ]
    return "\n".join(lines) + "\n", secrets


# logrotate reads a path as a glob, inside double quotes that it cannot escape.
LOGROTATE_UNSAFE = re.compile(r'[\s"\\*?\[\]{}]')


def logrotate_problem(log_path):
    found = LOGROTATE_UNSAFE.search(log_path)
    if found is None:
        return None
    return ("log_path=%s holds %r, which logrotate reads as a pattern, a quote or a separator: choose a log path "
            "without whitespace, quotes, backslashes, *, ?, [, ], { or }, or turn logrotate off" % (
                log_path, found.group()))


def logrotate_config(log_path, keep):
    """/etc/logrotate.d text for the log: weekly, or sooner past 200M; copytruncate keeps the file (and the
    descriptor the server writes to, which wait_for_server follows across the truncation)."""
    return "\n".join([
        "# Written by blackwell.gpu_node.sglang_server; changes are overwritten.",
        '"%s" {' % log_path,
        "    weekly",
        "    maxsize 200M",
        "    rotate %d" % int(keep),
        "    compress",
        "    delaycompress",
        "    missingok",
        "    notifempty",
        "    copytruncate",
        "}",
    ]) + "\n"
