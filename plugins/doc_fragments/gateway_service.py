# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    # The gateway's options, which gateway_service and gateway_service_info take and check alike. The type and
    # default of state_dir are blackwell.gpu_node.defaults.state_dir's, which both modules extend too.
    DOCUMENTATION = r"""
options:
  package:
    description:
      - The gateway the virtualenv holds, as the stack profile names it (C(gateway.package)) - sglang-router 0.3.2
        or smg 1.13.0. It picks the Python module the launcher starts and the policies O(policy) takes; the
        command line is alike in both.
    type: str
    choices: [sglang-router, smg]
    default: sglang-router
  manager:
    description:
      - V(auto) is V(systemd) where systemd is PID 1 (C(/run/systemd/system) exists), else V(module); a start's
        C(manager) and C(manager_reason) say which was chosen and why.
    type: str
    choices: [auto, systemd, module]
    default: auto
  user:
    description: The unprivileged user the gateway runs as, with its primary group. It must exist to start it.
    type: str
    default: sglang-gateway
  python:
    description: The gateway virtualenv's Python.
    type: path
    default: /opt/blackwell-gpu-node/gateway/bin/python
  launcher:
    description: The launcher's path.
    type: path
    default: /etc/blackwell-gpu-node/gateway/gateway_launch.py
  secrets_path:
    description: The keys file the launcher reads.
    type: path
    default: /etc/blackwell-gpu-node/gateway/secrets.json
  workers_path:
    description: The workers file the launcher registers at start (written by M(blackwell.gpu_node.gateway_workers)).
    type: path
    default: /etc/blackwell-gpu-node/gateway/workers.json
  systemd_unit_dir:
    description: Where the unit is written with O(manager=systemd).
    type: path
    default: /etc/systemd/system
  state_dir:
    description: Where the pid and state files C(sglang-gateway.pid) and C(sglang-gateway.json) go with
      O(manager=module); root's at every level and writable by root alone.
  log_path:
    description: The gateway's log with O(manager=module) (under systemd the journal keeps it); its directory must be
      root's at every level and writable by root alone.
    type: path
    default: /var/log/blackwell-gpu-node/sglang-gateway.log
  host:
    description: Address the gateway listens on (C(--host)).
    type: str
    default: 127.0.0.1
  port:
    description: Port of the gateway.
    type: int
    default: 30080
  metrics_host:
    description: Address of its Prometheus metrics (C(--prometheus-host)).
    type: str
    default: 127.0.0.1
  metrics_port:
    description: Port of its Prometheus metrics.
    type: int
    default: 29000
  policy:
    description:
      - Load-balancing policy. sglang-router - V(random), V(round_robin), V(cache_aware), V(manual); smg - those and
        V(passthrough), V(least_load), V(consistent_hashing), V(prefix_hash). V(power_of_two) is not taken - neither
        gateway starts it without workers on its command line, and the workers are registered through the API.
    type: str
    default: cache_aware
  health_check_interval:
    description: Seconds between health checks of each worker.
    type: int
    default: 10
  health_check_timeout:
    description: Seconds a health check may take.
    type: int
    default: 5
  health_failure_threshold:
    description: Failed checks in a row that make a worker unhealthy.
    type: int
    default: 3
  health_success_threshold:
    description: Passed checks in a row that make it healthy again.
    type: int
    default: 2
  retry_max_retries:
    description: Attempts of a request in all, each on a worker chosen anew.
    type: int
    default: 3
  request_timeout:
    description: Seconds a request may take.
    type: int
    default: 1800
  worker_startup_timeout:
    description: Seconds the gateway tries to reach a worker being registered.
    type: int
    default: 1800
  shutdown_grace_period:
    description: Seconds the gateway waits for requests in flight once asked to stop.
    type: int
    default: 180
  log_level:
    description: The gateway's log level.
    type: str
    choices: [debug, info, warn, error]
    default: info
  admin_key:
    description:
      - The admin key the keys file holds; only checked here (set, without a colon or control character), never
        written or shown.
    type: str
  api_key:
    description: The client key the keys file holds, if any; only checked here.
    type: str
  server_ports:
    description: Variable name to port of each other listener of the host, which neither gateway port may take.
    type: dict
    default: {}
notes:
  - The keys never reach a command line, the unit or the state; the launcher reads them from O(secrets_path).
"""
