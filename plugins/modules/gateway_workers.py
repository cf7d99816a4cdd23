#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: gateway_workers
short_description: Bring the workers of a running SGLang model gateway to a list, through its admin API (internal)
version_added: 0.1.0
author:
  - Blackwell GPU node maintainers (@blackwell-gpu-node)
description:
  - Internal to the C(blackwell.gpu_node.gateway) role and the C(blackwell.gpu_node.serve),
    C(blackwell.gpu_node.health) and C(blackwell.gpu_node.upgrade) playbooks, which call it; not meant for
    playbooks of your own.
  - Reads the workers a running SGLang model gateway (sglang-router 0.3.2 or smg 1.13.0, O(package)) has registered
    (C(GET /workers)), plans what brings them to O(workers), and carries the plan out in the same call through the
    gateway's admin API, without restarting it; a gateway that already has exactly these workers is not changed.
  - A worker of O(workers) that is not registered is added (C(POST /workers)) with its own API key and the labels
    C(node) (its O(workers[].name)) and C(blackwell_key_digest) (a digest of its URL and key; the gateway never shows
    a key, so a changed key is seen through this label). A registered worker whose key or name changed is updated in
    place (sglang-router C(PUT /workers/<id>), smg C(PATCH /workers/<id>), with its key and labels only). With
    O(exclusive), a registered worker that O(workers) does not list is removed (C(DELETE /workers/<id>)).
  - O(out) takes workers out of rotation and puts them back; a worker it names is removed from the gateway and not
    added; one that it no longer names is added again. A removal takes effect at once; requests that already run on
    the worker end normally, and no new one is sent to it. smg lists a removed worker as draining until then (a few
    seconds at least); such a worker counts as removed here. smg refuses to add a URL it still drains (HTTP 409), so
    the addition is sent again until it is taken, for O(wait_timeout) seconds at most, then the run fails naming
    it.
  - The gateway registers an added worker in the background, once the worker's C(/health) answers. The module
    then waits, for at most O(wait_timeout) seconds, until every worker it added or updated is listed and healthy,
    and fails naming those that are not.
  - Every request to the gateway has one deadline (O(timeout)) for connecting, sending and reading, and reads at
    most 4 MiB of an answer. A listing of more than 4096 workers, or an answer with a number of more than 32
    characters, is refused.
  - A worker is removed or updated by the id the gateway lists it by, which both gateways give as a UUID. An id of
    another shape is never put into a request; the module fails naming it, before it changes the gateway or
    O(workers_file).
  - A listing whose labels are where the other gateway puts them (sglang-router C(metadata), smg C(labels)) is
    refused naming O(package), before anything changes.
  - What the gateway says (ids, URLs, names, an error's body) is shown without terminal sequences or control
    characters, each value cut to 300 bytes, with the admin key and the workers' keys masked.
  - Workers are compared by URL, with scheme and host in lower case and the port written out (C(http://h) is
    C(http://h:80)); URLs are registered in that form.
extends_documentation_fragment:
  - blackwell.gpu_node.attributes
attributes:
  check_mode:
    support: full
    details: Reads the gateway's workers and reports the plan; sends no change.
  diff_mode:
    support: full
    details: The registered workers before and after, as C(URL (name)) lines; no key.
  platform:
    support: full
    platforms: posix
options:
  gateway_url:
    description:
      - Base URL of the gateway's main port, such as V(http://127.0.0.1:30080).
    type: str
    default: http://127.0.0.1:30080
  package:
    description:
      - The gateway's package, as the stack profile names it (C(gateway.package)).
      - When not given, the one O(workers_file) records (each run that names it records it there), else
        V(sglang-router).
    type: str
    choices: [sglang-router, smg]
  admin_key:
    description:
      - The gateway's admin key (its C(--control-plane-api-keys) key of role admin), sent as the bearer token.
      - Without it the requests carry no key, which only a gateway started without control-plane and API keys
        accepts.
    type: str
  workers:
    description:
      - The workers the gateway should have.
    type: list
    elements: dict
    default: []
    suboptions:
      url:
        description: The worker's base URL, http or https, without a path, such as V(http://10.0.0.11:30000).
        type: str
        required: true
      name:
        description: A name for the worker (the node's inventory name), unique; O(out) can name it.
        type: str
      api_key:
        description: The worker's own API key (its SGLang C(--api-key)), which the gateway sends it.
        type: str
  out:
    description:
      - Workers of O(workers), by name or URL, to keep out of the gateway (for a drain); each must name a worker
        of O(workers).
    type: list
    elements: str
    default: []
  keep_out:
    description:
      - Keep out, besides those of O(out), the workers of O(workers) that O(workers_file) keeps out, so that a run
        that converges the fleet does not put back a worker another run took out for a drain.
    type: bool
    default: false
  exclusive:
    description:
      - Remove registered workers that O(workers) does not list. With V(false) such workers are left alone, so
        that O(workers) can name only the workers to add or take out.
    type: bool
    default: true
  workers_file:
    description:
      - The gateway's workers file, which its launcher registers at every start (the gateway keeps its workers in
        memory only). The module keeps it in step with the gateway, before it changes the gateway, with the
        registrations of O(workers) (those out included), the URLs of those out, which the launcher leaves
        out, so that a worker taken out for a drain stays out when the gateway restarts, and O(package) (when
        given; else the one recorded stays). With O(exclusive=false) the entries of workers that O(workers) does
        not name are kept.
      - Written root's, mode C(0640) (it holds the workers' keys), group O(workers_file_group), through its
        directory's descriptor (never through a link); that directory must be root's at every level and writable
        by root alone. A file whose owner, group or mode differs is written again. Where the directory does not
        exist nothing is kept; V(null) keeps no file.
    type: path
    default: /etc/blackwell-gpu-node/gateway/workers.json
  workers_file_group:
    description:
      - The group that may read O(workers_file) (the gateway's user's); when not given, that of the file there, else
        root.
    type: str
  wait_timeout:
    description:
      - Seconds to wait until the workers added or updated are registered and healthy; V(0) does not wait.
    type: float
    default: 60
  timeout:
    description: Seconds each request to the gateway may take in all.
    type: float
    default: 10
notes:
  - The gateway keeps its workers in memory only. The role P(blackwell.gpu_node.gateway#role) starts it with a
    launcher that registers the workers of its workers file (O(workers_file)) at every start, less those out; this
    module changes a running one and that file.
seealso:
  - module: blackwell.gpu_node.gateway_info
  - module: blackwell.gpu_node.gateway_service
"""

EXAMPLES = r"""
- name: Ensure the gateway routes to both nodes
  blackwell.gpu_node.gateway_workers:
    gateway_url: http://127.0.0.1:30080
    admin_key: "{{ gateway_admin_key }}"
    workers:
      - {name: gpu01, url: "http://10.0.0.11:30000", api_key: "{{ vault_gpu01_key }}"}
      - {name: gpu02, url: "http://10.0.0.12:30000", api_key: "{{ vault_gpu02_key }}"}

- name: Take gpu02 out of rotation before its upgrade (requests already on it end normally)
  blackwell.gpu_node.gateway_workers:
    admin_key: "{{ gateway_admin_key }}"
    workers: "{{ gateway_fleet }}"
    out: [gpu02]

- name: Put it back, and wait until the gateway finds it healthy
  blackwell.gpu_node.gateway_workers:
    admin_key: "{{ gateway_admin_key }}"
    workers: "{{ gateway_fleet }}"
    out: []
    wait_timeout: 120
"""

RETURN = r"""
changes:
  description: What was (or, in check mode, would be) changed, one line each; no key.
  returned: always
  type: list
  elements: str
  sample: ["remove http://10.0.0.12:30000 (gpu02)", "add http://10.0.0.13:30000 (gpu03)"]
workers:
  description: The workers the gateway lists after the run (in check mode, before it).
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
      description: Whether the gateway finds it healthy (only a healthy worker gets requests).
      type: bool
  sample: [{id: 5b0c8e1e-7c1d-4c5e-9f39-2a0f3c7b2f10, url: "http://10.0.0.11:30000", name: gpu01, healthy: true}]
out:
  description: The URLs of the workers kept out of the gateway (with O(exclusive=false), those of O(workers)).
  returned: always
  type: list
  elements: str
workers_file:
  description: The workers file kept in step, null when none was (no O(workers_file), or no directory for it).
  returned: always
  type: str
waiting:
  description: URLs of workers added or updated that were not listed healthy within O(wait_timeout).
  returned: always
  type: list
  elements: str
"""

import grp

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.errors import InvalidOption

from ansible_collections.blackwell.gpu_node.plugins.module_utils._gateway import workers as gateway_workers
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.serving import NoAnswer, exchange


def main():
    module = AnsibleModule(
        argument_spec=dict(
            gateway_workers.gateway_options(),
            out=dict(type="list", elements="str", default=[]),
            exclusive=dict(type="bool", default=True),
            keep_out=dict(type="bool", default=False),
            workers_file_group=dict(type="str"),
            wait_timeout=dict(type="float", default=60),
        ),
        supports_check_mode=True,
    )
    params = module.params
    problems = gateway_workers.worker_problems(params["workers"], "workers")
    problems += gateway_workers.out_problems(params["out"], params["workers"]) if not problems else []
    problem = gateway_workers.url_problem(params["gateway_url"], "gateway_url")
    if problem:
        problems.append(problem)
    for name in ("wait_timeout", "timeout"):
        if params[name] < 0 or (name == "timeout" and params[name] == 0):
            problems.append("%s=%s must be a number of seconds above 0" % (name, params[name]))
    group = None
    if params["workers_file_group"] is not None:
        try:
            group = grp.getgrnam(params["workers_file_group"]).gr_gid
        except KeyError:
            problems.append("workers_file_group=%s is no group of this host" % params["workers_file_group"])
    kept = gateway_workers.WorkersFile(params["workers_file"]) if params["workers_file"] else None
    kept = kept if kept is not None and kept.exists() else None
    previous = owner = None
    if kept is not None and not problems:
        try:
            previous, owner = kept.read()
        except (OSError, InvalidOption) as exc:
            problems.append(str(exc))
        else:
            group = group if group is not None else (owner["gid"] if owner else 0)
    if problems:
        module.fail_json(msg="Nothing was changed: " + "; ".join(problems), problems=problems)

    gateway = gateway_workers.Gateway(params["gateway_url"], params["admin_key"], exchange, NoAnswer,
                                      params["timeout"], [worker.get("api_key") for worker in params["workers"]],
                                      gateway_workers.package_of(params["package"], previous))
    result = dict(changed=False, changes=[], workers=[], out=[], waiting=[],
                  workers_file=kept.path if kept is not None else None)
    try:
        out = list(params["out"])
        if params["keep_out"]:
            named = set(gateway_workers.normalized_url(worker["url"]) for worker in params["workers"])
            out += [url for url in gateway_workers.out_of(previous) if url in named]
        before = gateway.workers()
        steps = gateway_workers.plan(before, params["workers"], out, params["exclusive"])
        result.update(changes=gateway_workers.describe(steps), out=steps["out"])
        refused = gateway_workers.id_problems(steps)
        if refused:
            module.fail_json(msg="Nothing was changed: " + "; ".join(refused), problems=refused, **result)
        document = gateway_workers.kept_document(previous, params["workers"], steps, params["exclusive"],
                                                 params["package"])
        # An owner, group or mode changed by hand would let others read the keys, or write the workers.
        writes = kept is not None and (document != previous or not kept.written(owner, group))
        if writes:
            result["changes"].append("write %s (%d workers, out: %s)" % (
                kept.path, len(document["workers"]), ", ".join(document["out"]) or "none"))
        result["changed"] = bool(result["changes"])
        if module._diff:
            shown_before, shown_after = gateway_workers.diff_lines(before, steps, params["workers"])
            result["diff"] = dict(before=shown_before, after=shown_after)
        if module.check_mode or not result["changed"]:
            result["workers"] = gateway_workers.view(before, params["workers"])
            module.exit_json(**result)
        if writes:
            # First: a gateway that restarts from here on leaves a worker taken out where it is.
            try:
                kept.write(document, group)
            except (OSError, InvalidOption) as exc:
                module.fail_json(msg="Nothing was changed: %s could not be written: %s" % (kept.path, exc), **result)
        gateway_workers.apply(gateway, steps, params["wait_timeout"])
        awaited = [body["url"] for body in steps["add"]] + [body["url"] for _id, body in steps["update"]]
        awaited = awaited if params["wait_timeout"] > 0 else []
        listing, result["waiting"] = gateway_workers.wait_registered(gateway, awaited, params["wait_timeout"])
        result["workers"] = gateway_workers.view(listing, params["workers"])
    except gateway_workers.GatewayError as exc:
        module.fail_json(msg="The gateway's workers could not be brought to the list: %s" % exc, **result)
    if result["waiting"]:
        module.fail_json(msg="The gateway took the changes, but these workers were not registered and healthy "
                             "within wait_timeout=%ss: %s. Check that each answers /health from the gateway's host, "
                             "and its API key" % (params["wait_timeout"], ", ".join(result["waiting"])), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
