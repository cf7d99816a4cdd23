#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: benchmark
short_description: Measure the throughput of a running SGLang server through its OpenAI-compatible API
version_added: 0.1.0
author:
  - Blackwell GPU node maintainers (@blackwell-gpu-node)
description:
  - Sends a fixed, named O(workload) to the server at O(url), streaming (C(stream=true)) from C(/v1/completions) or
    C(/v1/chat/completions), and returns output tokens per second, requests per second, time to first token and
    inter-token latency (median and 99th percentile).
  - The built-in client (O(client=builtin)) is the Python standard library only, run by the node's Python. Time to
    first token runs from sending a request to the first streamed chunk with text; inter-token latencies are the
    gaps between the following chunks; output tokens are the server's C(usage), else one per chunk with text.
  - The built-in client does not trust the answer. Each request must end within O(request_timeout) in all (every
    read gets only the time left), no line of an answer may be longer than 1 MiB, every chunk must be a JSON object
    of the types the API gives, and a redirect (HTTP 3xx) is not followed. A request that breaks one of these, or
    fails in any other way, is a failure with its reason in C(failures) of RV(metrics); the other requests go on.
  - O(client=bench_serving) runs SGLang's own C(python -m sglang.bench_serving) from the virtualenv at O(venv_path)
    (the stack's virtualenv, where the real SGLang is installed) on the same workload, and returns the same metrics.
    It runs as the virtualenv's owner in an empty environment (as root only when root owns the virtualenv), with
    its result file in a directory of that owner's that the module makes for it; the module reads the result back
    without following a link, at most 16 MiB, and only from a file the owner wrote.
  - The module fails when a request failed, naming each failed request by its index and reason, and returns the
    metrics of the run with the failure. A server whose requests fail is not healthy, so what the other requests
    measured is no measurement of it. The playbook C(blackwell.gpu_node.benchmark) keeps such a run as
    C(<time>-<workload>.failed.json) and fails naming the node; the filter C(blackwell.gpu_node.benchmark_compare)
    counts it as a regression and never as a baseline.
  - Changes nothing on the node. The playbook C(blackwell.gpu_node.benchmark) keeps the results on the controller and
    compares them.
extends_documentation_fragment:
  - blackwell.gpu_node.attributes
attributes:
  check_mode:
    support: full
    details: In check mode the options are checked and nothing is sent; RV(metrics) is not returned.
  diff_mode:
    support: none
  platform:
    support: full
    platforms: posix
options:
  url:
    description:
      - The server's base URL, for example C(http://127.0.0.1:30000). It has the scheme C(http) or C(https), a host,
        a port from 1 to 65535 when one is given, and a path prefix if the server has one; no query, no fragment.
      - A URL with credentials (C(user:password@) before the host) is refused, and they are masked in the result;
        give the server's key as O(api_key).
    type: str
    required: true
  api:
    description: V(completions) (C(/v1/completions)) or V(chat) (C(/v1/chat/completions)).
    type: str
    choices: [completions, chat]
    default: completions
  model:
    description: The C(model) field of each request (SGLang serves one model and answers to its path or served name).
    type: str
    default: default
  workload:
    description:
      - V(decode-heavy) (128-token prompts, 512 tokens out, 16 prompts, one at a time; the single stream a user sees),
        V(decode-batch) (128 in, 256 out, 64 prompts, 16 at a time) or V(prefill-heavy) (2048 in, 64 out, 32 prompts,
        8 at a time). Prompts are made of short words, one token each for common tokenizers.
    type: str
    choices: [decode-batch, decode-heavy, prefill-heavy]
    default: decode-heavy
  prompt_tokens:
    description: Overrides the workload's prompt length.
    type: int
  output_tokens:
    description: Overrides the workload's output length (C(max_tokens), with C(ignore_eos)).
    type: int
  prompts:
    description: Overrides the workload's number of requests.
    type: int
  concurrency:
    description: Overrides the workload's number of requests in flight at once.
    type: int
  api_key:
    description: The server's API key (C(Authorization Bearer)), for O(client=builtin); never shown.
    type: str
  request_timeout:
    description: Seconds one request of the built-in client may take in all, from connecting to its last chunk.
    type: float
    default: 600
  client:
    description: V(builtin) (standard library) or V(bench_serving) (C(sglang.bench_serving) from O(venv_path)).
    type: str
    choices: [builtin, bench_serving]
    default: builtin
  venv_path:
    description:
      - The virtualenv with SGLang installed, for O(client=bench_serving); its C(bin/python) runs the client as the
        virtualenv's owner.
    type: path
  model_path:
    description: The model directory, for O(client=bench_serving)'s tokenizer.
    type: str
notes:
  - The numbers measure the server at O(url). Against the test suite's SGLang stand-in they measure the stand-in's
    configured token rate and mean nothing about SGLang or a GPU.
  - O(client=bench_serving) writes its result into a new directory in the node's temporary directory (C(TMPDIR),
    else C(/tmp)), which the virtualenv's owner must be able to reach; it is removed afterwards. The client is
    stopped after an hour, its output is read up to 16 MiB, and no file it writes may grow beyond that.
"""

EXAMPLES = r"""
- name: Measure the server on this node
  blackwell.gpu_node.benchmark:
    url: http://127.0.0.1:30000
    workload: decode-heavy
  register: bench

- name: Measure it with SGLang's own client, run as the owner of the stack's virtualenv
  blackwell.gpu_node.benchmark:
    url: http://127.0.0.1:30000
    client: bench_serving
    venv_path: /home/sglang/ml-env
    model_path: /models/Qwen3-8B
  register: bench_serving
"""

RETURN = r"""
workload:
  description: The workload that ran, with its counts.
  returned: always
  type: dict
  sample: {name: decode-heavy, prompt_tokens: 128, output_tokens: 512, prompts: 16, concurrency: 1}
metrics:
  description:
    - C(completed), C(failed), C(errors) (up to 5 distinct reasons), C(failures), C(duration_s), C(output_tokens),
      C(output_throughput) (tokens/s), C(request_throughput) (requests/s), C(ttft_ms_median), C(ttft_ms_p99),
      C(itl_ms_median), C(itl_ms_p99).
    - C(failures) lists the first 20 failed requests of the built-in client, each with its C(index) (from 0, in the
      order the prompts are numbered) and C(reason); bench_serving gives no reasons, only the C(failed) count.
  returned: when the requests ran (not in check mode), with the failure too when a request failed
  type: dict
  sample:
    completed: 15
    failed: 1
    errors: ["no complete answer within request_timeout=600s"]
    failures: [{index: 3, reason: "no complete answer within request_timeout=600s"}]
    duration_s: 88.2
    output_tokens: 7680
    output_throughput: 87.075
    request_throughput: 0.17
    ttft_ms_median: 40.1
    ttft_ms_p99: 55.0
    itl_ms_median: 10.6
    itl_ms_p99: 11.9
client:
  description: The client that ran, C(builtin) or C(bench_serving).
  returned: always
  type: str
client_cpu_seconds:
  description: CPU seconds the built-in client used (user and system, all its threads); null for bench_serving.
  returned: unless in check mode
  type: float
"""

import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.errors import InvalidOption
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.text import result_line
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.bench_serving import bench_serving_metrics
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.benchmark import (
    WORKLOADS,
    BenchmarkError,
    checked_timeout,
    checked_url,
    run,
    run_failure,
    summary,
    url_credentials,
    workload,
)


def shown_metrics(metrics):
    """metrics with the reasons the server's answers gave (a status line, an exception's text) as a result may
    show them."""
    return dict(metrics, errors=[result_line(error) for error in metrics["errors"]],
                failures=[dict(failure, reason=result_line(failure["reason"])) for failure in metrics["failures"]])


def main():
    module = AnsibleModule(
        argument_spec=dict(
            url=dict(type="str", required=True),
            api=dict(type="str", default="completions", choices=["completions", "chat"]),
            model=dict(type="str", default="default"),
            workload=dict(type="str", default="decode-heavy", choices=sorted(WORKLOADS)),
            prompt_tokens=dict(type="int", no_log=False),
            output_tokens=dict(type="int", no_log=False),
            prompts=dict(type="int"),
            concurrency=dict(type="int"),
            api_key=dict(type="str", no_log=True),
            request_timeout=dict(type="float", default=600),
            client=dict(type="str", default="builtin", choices=["builtin", "bench_serving"]),
            venv_path=dict(type="path"),
            model_path=dict(type="str"),
        ),
        required_if=[("client", "bench_serving", ("venv_path", "model_path"))],
        supports_check_mode=True,
    )
    params = module.params
    # Credentials in the URL are refused below; masked, they cannot reach the result through the invocation either.
    module.no_log_values.update(url_credentials(params["url"]))
    try:
        chosen = workload(params["workload"], dict((key, params[key]) for key in (
            "prompt_tokens", "output_tokens", "prompts", "concurrency")))
        url = checked_url(params["url"])
        checked_timeout(params["request_timeout"])
    except BenchmarkError as exc:
        module.fail_json(msg=str(exc))
    result = dict(changed=False, workload=chosen, client=params["client"])
    if module.check_mode:
        module.exit_json(**result)
    if params["client"] == "bench_serving":
        try:
            metrics = bench_serving_metrics(params["venv_path"], url, params["model_path"], chosen)
        except (BenchmarkError, InvalidOption) as exc:
            module.fail_json(msg=str(exc), **result)
        result.update(metrics=metrics, client_cpu_seconds=None)
    else:
        cpu_before = time.process_time()
        results, duration = run(url, params["api"], params["model"], chosen, api_key=params["api_key"],
                                timeout=params["request_timeout"])
        result.update(metrics=shown_metrics(summary(results, duration)),
                      client_cpu_seconds=round(time.process_time() - cpu_before, 3))
    failure = run_failure(result["metrics"], url)
    if failure:
        # Twenty reasons of up to a line each: the message is cut to one line as a result shows it.
        module.fail_json(msg=result_line(failure), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
