# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Private to the blackwell.gpu_node collection: not a public API, it may change in any release.
"""The model gateway's process: the launcher's command line, its systemd unit where systemd is PID 1, and its state
files where the module runs it itself (_common.detached, as the SGLang server runs there)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

import hashlib
import json

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.detached import StateRefused, Tracked
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.systemd import HARDENING, systemd_quote
from ansible_collections.blackwell.gpu_node.plugins.module_utils._gateway import releases

UNIT = "sglang-gateway.service"
# The name of its state files in the state directory (manager=module).
NAME = "sglang-gateway"
# The gateway's flag for each setting, alike in every gateway of releases.GATEWAYS; the keys are never among them
# (the launcher reads those from a file).
FLAGS = (("host", "--host"), ("port", "--port"), ("metrics_host", "--prometheus-host"),
         ("metrics_port", "--prometheus-port"), ("policy", "--policy"),
         ("health_check_interval", "--health-check-interval-secs"),
         ("health_check_timeout", "--health-check-timeout-secs"),
         ("health_failure_threshold", "--health-failure-threshold"),
         ("health_success_threshold", "--health-success-threshold"), ("retry_max_retries", "--retry-max-retries"),
         ("request_timeout", "--request-timeout-secs"), ("worker_startup_timeout", "--worker-startup-timeout-secs"),
         ("shutdown_grace_period", "--shutdown-grace-period-secs"))
# systemd waits this much longer than the gateway's own grace period before it kills what is left.
STOP_MARGIN = 15


class GatewayStateRefused(StateRefused):
    """The gateway's state file cannot be trusted."""


class GatewayProcess(Tracked):
    """The state files of the gateway that the module runs itself. The gateway retitles its process (setproctitle:
    `sglang::router`, `smg::router`), so that title stands for the recorded command line, whichever gateway it is."""

    writer = "gateway_service"
    what = "gateway"
    error = GatewayStateRefused
    retitles = releases.titles()

    def __init__(self, state_dir):
        super(GatewayProcess, self).__init__(state_dir, NAME)


def router_arguments(settings):
    """The gateway's own arguments for settings (checked by workers.settings_problems): no --worker-urls (each
    worker is registered with its own key), no --log-dir (journald or the log file keeps the log), no key."""
    arguments = []
    for key, flag in FLAGS:
        arguments += [flag, str(settings[key])]
    return arguments + ["--log-level", settings.get("log_level") or "info"]


def launcher_argv(settings, python, launcher, secrets_path, workers_path):
    """The gateway's command line: the launcher with python in isolated mode (-I: no PYTHON* variable, no user
    site, not the script's directory on the path), its files, the module of settings' package that it starts,
    then the gateway's arguments."""
    return ([python, "-I", launcher, "--secrets", secrets_path, "--workers", workers_path, "--gateway-module",
             releases.gateway(settings["package"])["module"], "--"] + router_arguments(settings))


def environment_digest(environment):
    """What the state records of the gateway's environment, as the server's state does."""
    return hashlib.sha256(json.dumps(sorted(environment.items())).encode("utf-8")).hexdigest()


def unit_text(argv, user, shutdown_grace_period):
    """The unit that runs argv as user: restarted on failure, stopped with SIGTERM (the gateway then refuses new
    connections and waits for requests in flight up to its grace period), with the collection's hardening and no
    access to /home (the gateway writes nothing: its virtualenv, launcher and files are root's)."""
    lines = [
        "# Written by blackwell.gpu_node.gateway_service; changes are overwritten.",
        "[Unit]",
        "Description=SGLang model gateway (blackwell.gpu_node)",
        "After=network-online.target",
        "Wants=network-online.target",
        "",
        "[Service]",
        "User=%s" % systemd_quote(user),
        "Group=%s" % systemd_quote(user),
        "ExecStart=" + " ".join(systemd_quote(word) for word in argv),
        "Restart=on-failure",
        "RestartSec=5",
        "TimeoutStopSec=%d" % (int(shutdown_grace_period) + STOP_MARGIN),
    ]
    lines += list(HARDENING) + ["ProtectHome=yes", "", "[Install]", "WantedBy=multi-user.target"]
    return "\n".join(lines) + "\n"
