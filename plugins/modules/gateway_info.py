#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: gateway_info
short_description: Report which workers a running SGLang model gateway holds, healthy or not, against the fleet
version_added: 0.1.0
author:
  - Blackwell GPU node maintainers (@blackwell-gpu-node)
description:
  - Reads the workers a running SGLang model gateway (sglang-router 0.3.2 or smg 1.13.0, O(package)) has registered
    (C(GET /workers) with the admin key) and whether it finds each healthy (only a healthy worker gets requests).
    Changes nothing. A worker smg still drains after its removal counts as not registered.
  - With O(workers) (the fleet), says which of them are registered healthy, registered unhealthy, not registered,
    or taken out on purpose (for a drain, the URLs out in O(workers_file), as M(blackwell.gpu_node.gateway_workers)
    keeps them), and which registered workers are not of the fleet. RV(problems) names each worker of the fleet
    that is registered unhealthy, or missing without being out.
  - Every request has one deadline (O(timeout)) and reads at most 4 MiB; a listing of more than 4096 workers is
    refused. What the gateway says (ids, URLs, names, an error's body) is shown without terminal sequences or
    control characters, each value cut to 300 bytes, with the admin key and the workers' keys masked.
extends_documentation_fragment:
  - blackwell.gpu_node.attributes
attributes:
  check_mode:
    support: full
    details: Reads only; check mode runs it the same.
  diff_mode:
    support: none
  platform:
    support: full
    platforms: posix
options:
  gateway_url:
    description: Base URL of the gateway's main port.
    type: str
    default: http://127.0.0.1:30080
  package:
    description:
      - The gateway's package, as the stack profile names it (C(gateway.package)).
      - When not given, the one O(workers_file) records (M(blackwell.gpu_node.gateway_workers) records it there),
        else V(sglang-router).
    type: str
    choices: [sglang-router, smg]
  admin_key:
    description: The gateway's admin key, sent as the bearer token.
    type: str
  workers:
    description: The fleet's workers, to compare with; their keys, if given, are ignored.
    type: list
    elements: dict
    default: []
    suboptions:
      url:
        description: The worker's base URL.
        type: str
        required: true
      name:
        description: Its name (the node's inventory name).
        type: str
      api_key:
        description: Ignored, so that the list of M(blackwell.gpu_node.gateway_workers) can be given as is.
        type: str
  workers_file:
    description:
      - The gateway's workers file, whose URLs out are the workers taken out on purpose. Read root's way (never
        through a link, bounded); a file or directory that is not there means none is out; V(null) reads none.
    type: path
    default: /etc/blackwell-gpu-node/gateway/workers.json
  timeout:
    description: Seconds each request to the gateway may take in all.
    type: float
    default: 10
seealso:
  - module: blackwell.gpu_node.gateway_workers
"""

EXAMPLES = r"""
- name: Ask the gateway which nodes it routes to
  blackwell.gpu_node.gateway_info:
    admin_key: "{{ gateway_admin_key }}"
    workers:
      - {name: gpu01, url: "http://10.0.0.11:30000"}
      - {name: gpu02, url: "http://10.0.0.12:30000"}
  register: gateway

- name: Fail on a node the gateway holds unhealthy or lost
  ansible.builtin.assert:
    that: gateway.problems == []
    fail_msg: "{{ gateway.problems | join('; ') }}"
"""

RETURN = r"""
workers:
  description: The workers the gateway lists.
  returned: always
  type: list
  elements: dict
  contains:
    id:
      description: The gateway's id of the worker.
      type: str
    url:
      description: The worker's URL.
      type: str
    name:
      description: Its name in O(workers), else its C(node) label.
      type: str
    healthy:
      description: Whether the gateway finds it healthy.
      type: bool
  sample: [{id: 5b0c8e1e-7c1d-4c5e-9f39-2a0f3c7b2f10, url: "http://10.0.0.11:30000", name: gpu01, healthy: true}]
healthy:
  description: Workers of O(workers) registered and healthy, as C(name (URL)).
  returned: always
  type: list
  elements: str
  sample: ["gpu01 (http://10.0.0.11:30000)"]
unhealthy:
  description: Workers of O(workers) registered but unhealthy.
  returned: always
  type: list
  elements: str
missing:
  description: Workers of O(workers) not registered and not out.
  returned: always
  type: list
  elements: str
out:
  description: Workers of O(workers) taken out on purpose and not registered.
  returned: always
  type: list
  elements: str
unexpected:
  description: Registered workers that O(workers) does not list.
  returned: always
  type: list
  elements: str
problems:
  description: One line for each worker of O(workers) registered unhealthy, or missing without being out.
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.errors import InvalidOption
from ansible_collections.blackwell.gpu_node.plugins.module_utils._gateway import workers as gateway_workers
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.serving import NoAnswer, exchange


def main():
    module = AnsibleModule(
        argument_spec=gateway_workers.gateway_options(),
        supports_check_mode=True,
    )
    params = module.params
    problems = gateway_workers.worker_problems(params["workers"], "workers")
    problem = gateway_workers.url_problem(params["gateway_url"], "gateway_url")
    if problem:
        problems.append(problem)
    if params["timeout"] <= 0:
        problems.append("timeout=%s must be a number of seconds above 0" % params["timeout"])
    kept = gateway_workers.WorkersFile(params["workers_file"]) if params["workers_file"] else None
    document = None
    if kept is not None and not problems:
        try:
            document = kept.read()[0]
        except (OSError, InvalidOption) as exc:
            problems.append(str(exc))
    if problems:
        module.fail_json(msg="; ".join(problems), problems=problems)

    gateway = gateway_workers.Gateway(params["gateway_url"], params["admin_key"], exchange, NoAnswer,
                                      params["timeout"], [worker.get("api_key") for worker in params["workers"]],
                                      gateway_workers.package_of(params["package"], document))
    try:
        listing = gateway.workers()
    except gateway_workers.GatewayError as exc:
        module.fail_json(msg="The gateway's workers could not be read: %s" % exc)
    result = gateway_workers.fleet_health(listing, params["workers"], gateway_workers.out_of(document))
    module.exit_json(changed=False, workers=gateway_workers.view(listing, params["workers"]), **result)


if __name__ == "__main__":
    main()
