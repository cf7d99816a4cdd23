#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: preflight_check
short_description: Know a GPU host before touching it, in one call, and refuse it naming every problem (internal)
version_added: 0.1.0
author:
  - Blackwell GPU node maintainers (@blackwell-gpu-node)
description:
  - Internal to the C(blackwell.gpu_node.preflight) role, which calls it; not meant for playbooks of your own.
  - The observation and the decision of the C(blackwell.gpu_node.preflight) role, in one call.
  - Observes the host as Ansible's C(min) fact subset and M(blackwell.gpu_node.gpu_facts) do (and returns both as
    facts), the GPUs' health as M(blackwell.gpu_node.gpu_health_info) reads it (where GPUs are seen, the PCIe fabric
    between them included), a pending
    reboot (C(/var/run/reboot-required) and its C(.pkgs)), the Fabric Manager, NVSwitch and NVLink
    subnet manager packages C(dpkg-query) knows, the model directory and its C(config.json), the free space where
    the virtualenv is or will be, the interpreter the virtualenv is made with (running O(venv_probe) with it), the
    service user, who holds the server's port (as M(blackwell.gpu_node.sglang_server_info) says) and which
    C(libcuda.so.1) each directory of the loader path holds (those of C(/etc/ld.so.conf) and C(/etc/ld.so.conf.d),
    and of the server's C(LD_LIBRARY_PATH), O(settings.library_paths)).
  - The free space is checked only for a virtualenv that a run would build, one that does not exist beside
    O(settings.venv_path) under the name the C(blackwell.gpu_node.ml_stack) role gives it, from the same inputs
    (the profile, the interpreter, O(lock) and the torch it adopts, O(settings.torch_from)).
  - Weighs that against O(settings), the stack profile O(profile) and the places of the other hosts of the play
    (O(peers)). Fails, naming every problem with the variable and the fix, when the host is not fit; otherwise
    returns what was checked.
  - Each GPU health finding of severity V(unhealthy) is a problem that names the GPU, the finding, its evidence and
    NVIDIA's action; each V(degraded) one is a warning and a note.
  - A C(libcuda) of another driver release than the loaded one on the loader path (CUDA's compatibility libraries,
    NVIDIA's C(cuda-compat) package) is a problem unless the driver is older than the stack profile's CUDA release
    needs (NVIDIA's table of the driver each release needs); with a driver new enough, CUDA fails with error 803
    (C(cudaErrorSystemDriverMismatch)).
  - Changes nothing.
extends_documentation_fragment:
  - blackwell.gpu_node.attributes
  - blackwell.gpu_node.attributes.facts
  - blackwell.gpu_node.defaults.server_state_dir
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  facts:
    support: full
  platform:
    support: full
    platforms: debian
options:
  settings:
    description:
      - The preflight role's variables without their C(preflight_) prefix. Each is converted to its type here, so
        that templated values, which are strings before ansible-core 2.19, are compared as numbers and booleans.
    type: dict
    required: true
    suboptions:
      gpus_required:
        description: Whether the host must have NVIDIA GPUs and a working driver.
        type: bool
        required: true
      expected_gpu_family:
        description: The GPU family every GPU must belong to (such as V(blackwell) or V(hopper)); null accepts any.
        type: str
      expected_compute_capability:
        description: The compute capability every GPU must have (such as V(12.0)); null accepts any.
        type: str
      expected_gpu_count:
        description: How many GPUs the host must have; null accepts any number.
        type: int
      tensor_parallel_size:
        description: The server's tensor parallel size, which the GPUs of the server's nodes must cover.
        type: int
        required: true
      pipeline_parallel_size:
        description: The server's pipeline parallel size.
        type: int
        required: true
      nnodes:
        description: How many nodes form one server.
        type: int
        required: true
      node_rank:
        description: This node's rank among them.
        type: int
        required: true
      dist_init_addr:
        description: The address at which the server's nodes meet (C(host:port)); needed with more than one node.
        type: str
      model_path:
        description: The model's directory on the host, or its hub id with O(settings.model_is_hub_id).
        type: str
      model_is_hub_id:
        description: Whether O(settings.model_path) is a hub id, which nothing on the host can check.
        type: bool
        default: false
      venv_path:
        description: The virtualenv's stable path, whose file system must have O(settings.venv_min_free_gib) free.
        type: str
      venv_python:
        description: The interpreter the virtualenv is made with; checked to run and to create virtualenvs.
        type: str
      venv_min_free_gib:
        description: GiB that must be free for a new virtualenv.
        type: int
      venv_owner:
        description:
          - The virtualenv's owner (C(ml_stack_venv_owner)), as whom the tree of O(settings.torch_from) is read; null
            for whoever runs the role.
        type: str
      torch_from:
        description:
          - The torch the virtualenv adopts (C(ml_stack_torch_from)), part of its name with O(lock); null for the
            profile's own.
        type: str
      service_user_name:
        description: The account the server runs as.
        type: str
      service_user_create:
        description: Whether the run creates that account; without it, the account must exist.
        type: bool
        default: true
      driver_install:
        description: Whether the run installs the NVIDIA driver (a missing driver is then a note, not a refusal).
        type: bool
        default: false
      driver_reboot:
        description: Whether the run may reboot the host for its driver (a pending reboot is then a note).
        type: bool
        default: false
      fabric_manager:
        description: What the run does about NVIDIA Fabric Manager, one of V(auto), V(true), V(false).
        type: raw
        default: false
      host:
        description: The address the server listens on.
        type: str
        default: 127.0.0.1
      port:
        description: The port the server listens on, which must be free or held by our server; null skips the check.
        type: int
      library_paths:
        description:
          - The C(LD_LIBRARY_PATH) the server runs with, by the variable that sets it (such as
            C(runtime_env_extra_env)); the messages name that variable. A null or empty value sets none.
        type: dict
        default: {}
      gpu_health_severity_overrides:
        description:
          - Severities to use instead of the built-in ones for the GPUs' health findings, by finding id
            (M(blackwell.gpu_node.gpu_health_info)'s O(blackwell.gpu_node.gpu_health_info#module:severity_overrides)).
          - A finding of severity V(unhealthy) refuses the host; one of severity V(degraded) is a warning.
        type: dict
        default: {}
  profile:
    description: The resolved stack profile (the C(stack_selected) of role C(blackwell.gpu_node.stack)).
    type: dict
    required: true
  host:
    description: The name the messages give this host (its inventory name).
    type: str
    required: true
  peers:
    description:
      - The place of every host of the play in a multi-node server, each with C(host), C(nnodes), C(node_rank) and
        C(dist_init_addr); hosts that share a C(dist_init_addr) must agree.
    type: list
    elements: dict
    default: []
    suboptions:
      host:
        description: The host's inventory name.
        type: str
        required: true
      nnodes:
        description: How many nodes that host says form its server.
        type: int
        required: true
      node_rank:
        description: That host's rank.
        type: int
        required: true
      dist_init_addr:
        description: The address at which that host's server meets.
        type: str
  lock:
    description:
      - The profile's lock (the C(stack_selected_lock) of role C(blackwell.gpu_node.stack)), part of the virtualenv's
        name; null for a profile without one.
    type: dict
  adopt_probe:
    description:
      - The Python source that reads the metadata of the tree of O(settings.torch_from) with the tree's interpreter
        (a virtualenv's own, else C(venv_python) of O(settings)), as its owner (role C(blackwell.gpu_node.ml_stack)'s
        C(inspect_torch.py)), for the virtualenv's name. Run only with O(settings.torch_from) and an owner that
        exists; without one, the virtualenv counts as new.
    type: str
  venv_probe:
    description:
      - The Python source that C(venv_python) of O(settings) runs to print its version and whether it can
        create virtualenvs (role C(blackwell.gpu_node.ml_stack)'s C(inspect_python.py)). Run only when
        C(venv_path) and C(venv_python) of O(settings) are set.
    type: str
    required: true
  server_name:
    description:
      - The name of the server whose port C(port) of O(settings) may hold
        (M(blackwell.gpu_node.sglang_server)'s O(blackwell.gpu_node.sglang_server#module:name)).
    type: str
    default: sglang
  server_state_dir:
    description:
      - Where that server's state is recorded
        (M(blackwell.gpu_node.sglang_server)'s O(blackwell.gpu_node.sglang_server#module:state_dir)).
"""

EXAMPLES = r"""
- name: Refuse the host, naming every problem, or say what was checked
  blackwell.gpu_node.preflight_check:
    settings:
      gpus_required: true
      expected_gpu_family: hopper
      expected_compute_capability: "9.0"
      expected_gpu_count: 8
      tensor_parallel_size: 8
      pipeline_parallel_size: 1
      nnodes: 1
      node_rank: 0
      dist_init_addr:
      model_path: /shared/models/qwen
      model_is_hub_id: false
      venv_path: /opt/ml-env
      venv_python: /usr/bin/python3
      venv_min_free_gib: 30
      venv_owner: sglang
      torch_from:
      service_user_name: sglang
      service_user_create: true
      driver_install: false
      driver_reboot: false
      fabric_manager: auto
      host: 127.0.0.1
      port: 30000
      # The slots of this box are x8 by design.
      gpu_health_severity_overrides:
        pcie_width_degraded: info
      library_paths:
        runtime_env_extra_env: /opt/site/lib
    profile: "{{ stack_selected }}"
    host: "{{ inventory_hostname }}"
    lock: "{{ stack_selected_lock }}"
    venv_probe: "{{ lookup('ansible.builtin.file', 'inspect_python.py') }}"
    adopt_probe: "{{ lookup('ansible.builtin.file', 'inspect_torch.py') }}"
  register: preflight_report

- name: Say what was checked
  ansible.builtin.debug:
    msg: "{{ preflight_report.checked + preflight_report.notes }}"
"""

RETURN = r"""
ok:
  description: Whether the host is fit; false only with RV(problems), when the module fails.
  returned: always
  type: bool
problems:
  description: Every reason the host is refused, each naming the variable and the fix; the failure's message lists them.
  returned: always
  type: list
  elements: str
  sample: ["preflight_model_path=/srv/models/missing does not exist on this host: ..."]
notes:
  description: What is worth a warning but does not refuse the host.
  returned: always
  type: list
  elements: str
checked:
  description: What was checked and found fit.
  returned: always
  type: list
  elements: str
  sample: ["GPUs required (preflight_gpus_required: true)", "debian12 on x86_64 is supported by stack profile cu130"]
gpu_health:
  description:
    - The GPUs' health as M(blackwell.gpu_node.gpu_health_info) returns it (C(verdict), C(reason), C(summary),
      C(counts), C(gpus) with their C(findings), C(findings), C(kernel_log), C(pcie_fabric)), weighed with
      O(settings.gpu_health_severity_overrides); null where no GPU was seen, C(problem) alone where those overrides
      are not valid.
  returned: always
  type: dict
  sample: {verdict: healthy, reason: "2 GPU(s), no unhealthy or degraded finding"}
ansible_facts:
  description:
    - Ansible's C(min) fact subset, as C(ansible.builtin.setup) with C(gather_subset=[!all, min]) returns it, and
      RV(ansible_facts.gpu) as M(blackwell.gpu_node.gpu_facts) returns it.
  returned: always
  type: dict
  contains:
    gpu:
      description: The GPUs of the host; see M(blackwell.gpu_node.gpu_facts).
      type: dict
"""

import os
import re

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native
from ansible.module_utils.facts import ansible_collector, default_collectors
from ansible.module_utils.facts.namespace import PrefixFactNamespace

from ansible_collections.blackwell.gpu_node.plugins.module_utils._cuda.fabric import INSTALLED_PATTERNS
from ansible_collections.blackwell.gpu_node.plugins.module_utils._cuda.linker import entries
from ansible_collections.blackwell.gpu_node.plugins.module_utils._node.gpu_health import (
    QUICK_DCGM_LEVEL,
    gather as gather_gpu_health,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._node.kernel_log import read_kernel_log
from ansible_collections.blackwell.gpu_node.plugins.module_utils._node.nvidia_smi import COMMAND_TIMEOUT, gather_host
from ansible_collections.blackwell.gpu_node.plugins.module_utils._node.pcie_fabric import read_fabric
from ansible_collections.blackwell.gpu_node.plugins.module_utils._node.preflight import (
    adopted_tree,
    evaluate,
    gpu_health_lines,
    gpu_health_state,
    observe,
    refusal,
    venv_python_state,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.defaults import STATE_DIR
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.errors import InvalidOption
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.files import read_regular
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.owner import run_answered
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.instance import (
    BadState,
    Instance,
    SystemdFailed,
    observe_recorded,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._sglang.options import (
    name_problems,
    port_state,
    text_problems,
)

# ansible.builtin.setup's minimal subset, which gather_subset [!all, min] gathers.
MINIMAL_FACTS = frozenset(["apparmor", "caps", "cmdline", "date_time", "distribution", "dns", "env", "fips", "local",
                           "lsb", "pkg_mgr", "platform", "python", "selinux", "service_mgr", "ssh_pub_keys", "user"])


SETTINGS = dict(
    gpus_required=dict(type="bool", required=True),
    expected_gpu_family=dict(type="str"),
    expected_compute_capability=dict(type="str"),
    expected_gpu_count=dict(type="int"),
    tensor_parallel_size=dict(type="int", required=True),
    pipeline_parallel_size=dict(type="int", required=True),
    nnodes=dict(type="int", required=True),
    node_rank=dict(type="int", required=True),
    dist_init_addr=dict(type="str"),
    model_path=dict(type="str"),
    model_is_hub_id=dict(type="bool", default=False),
    venv_path=dict(type="str"),
    venv_python=dict(type="str"),
    venv_min_free_gib=dict(type="int"),
    venv_owner=dict(type="str"),
    torch_from=dict(type="str"),
    service_user_name=dict(type="str"),
    service_user_create=dict(type="bool", default=True),
    driver_install=dict(type="bool", default=False),
    driver_reboot=dict(type="bool", default=False),
    fabric_manager=dict(type="raw", default=False),
    host=dict(type="str", default="127.0.0.1"),
    port=dict(type="int"),
    gpu_health_severity_overrides=dict(type="dict", default={}),
    library_paths=dict(type="dict", default={}),
)
PEER = dict(host=dict(type="str", required=True), nnodes=dict(type="int", required=True),
            node_rank=dict(type="int", required=True), dist_init_addr=dict(type="str"))

# The dynamic linker's configuration, from which ldconfig makes its cache.
LD_SO_CONF = "/etc/ld.so.conf"
# A linker configuration file is a few lines: no more of one is read than this.
LD_SO_CONF_LIMIT = 1 << 16
# The file libcuda.so.1 resolves to names the driver release it belongs to: libcuda.so.580.95.05.
LIBCUDA_RELEASE = re.compile(r"libcuda\.so\.([0-9]+(?:\.[0-9]+)+)")


def conf_directories(ld_so_conf):
    """[(directory, file)] of the absolute directories that ld_so_conf and the *.conf files of <ld_so_conf>.d list,
    each file read through its links (Debian's alternatives link some) and no further than LD_SO_CONF_LIMIT; a file
    that cannot be read is left out, as it adds nothing to the linker's cache either."""
    conf_dir = ld_so_conf + ".d"
    try:
        names = sorted(name for name in os.listdir(conf_dir) if name.endswith(".conf"))
    except OSError:
        names = []
    found = []
    for path in [ld_so_conf] + [os.path.join(conf_dir, name) for name in names]:
        try:
            state = read_regular(os.path.realpath(path), LD_SO_CONF_LIMIT, cut=True)
        except (OSError, InvalidOption):
            continue
        if state is not None:
            found.extend((directory, path) for directory in entries(state["data"].decode("utf-8", "replace"))
                         if directory.startswith("/"))
    return found


def libcuda_release(directory):
    """The driver release of the libcuda.so.1 in directory, the one the loader takes from it; None without one."""
    target = os.path.realpath(os.path.join(directory, "libcuda.so.1"))
    match = LIBCUDA_RELEASE.fullmatch(os.path.basename(target))
    return match.group(1) if match and os.path.isfile(target) else None


def loader_libcuda(library_paths, ld_so_conf=LD_SO_CONF):
    """The directories of the loader path that hold a libcuda.so.1, as check_compat weighs them: each
    LD_LIBRARY_PATH of the server's environment (library_paths: {variable: value}) first, as the loader searches
    it first, then those of the linker's configuration."""
    listed = []
    for variable, value in sorted(library_paths.items()):
        listed.extend((directory, variable, None) for directory in ("%s" % (value or "")).split(":")
                      if directory.startswith("/"))
    listed.extend((directory, None, path) for directory, path in conf_directories(ld_so_conf))
    found = []
    for directory, variable, path in listed:
        release = libcuda_release(directory)
        if release is not None:
            found.append(dict(directory=directory, libcuda=release, variable=variable, file=path))
    return found


def gpu_command_runner():
    """run(argv) -> (rc, stdout, stderr), bounded, each argv run once: gpu_facts and the GPUs' health share what
    nvidia-smi -q printed."""
    outputs = {}

    def run(argv):
        key = tuple(argv)
        if key not in outputs:
            outputs[key] = run_answered(list(argv), COMMAND_TIMEOUT)
        return outputs[key]
    return run


def gpu_health(module, settings, gpu, run):
    """The GPUs' health with the inventory's severities, or None where gpu_facts saw no GPU."""
    def assess(overrides):
        return gather_gpu_health(module.get_bin_path("nvidia-smi"), None, run, read_kernel_log, dict(
            severity_overrides=overrides, kernel_log=True, dcgm_diag=False, dcgm_diag_level=QUICK_DCGM_LEVEL,
            pcie_fabric=True), read_fabric)
    return gpu_health_state(settings, gpu, assess)


def minimal_facts(module):
    """The facts setup's [!all, min] returns, with their ansible_ prefix, as setup returns them."""
    collector = ansible_collector.get_ansible_collector(
        all_collector_classes=default_collectors.collectors,
        namespace=PrefixFactNamespace(namespace_name="ansible", prefix="ansible_"),
        filter_spec="*", gather_subset=["!all", "min"], gather_timeout=10, minimal_gather_subset=MINIMAL_FACTS)
    return collector.collect(module=module)


def fabric_packages(module):
    """dpkg-query's lines for the fabric packages; empty where dpkg is missing or none is known (exit status 1)."""
    dpkg_query = module.get_bin_path("dpkg-query")
    if not dpkg_query:
        return ""
    _rc, out, _err = module.run_command(
        [dpkg_query, "--show", "--showformat=${Package}\t${Version}\t${db:Status-Abbrev}\n"] + list(INSTALLED_PATTERNS))
    return out


def venv_python(module, settings, probe):
    if settings.get("venv_path") is None or settings.get("venv_python") is None:
        return {}
    try:
        return venv_python_state(*module.run_command([settings["venv_python"], "-B", "-c", probe],
                                                     handle_exceptions=False))
    except OSError as exc:
        return dict(error=to_native(exc))


def server_port_state(module, params):
    """free, in_use or ours (our recorded server listens there); None without a port."""
    port = params["settings"].get("port")
    if port is None:
        return None
    host = params["settings"].get("host") or "127.0.0.1"
    # What sglang_server refuses before it reads its state, refused here too, with its words.
    problems = (name_problems(dict(name=params["server_name"], state_dir=params["server_state_dir"]))
                + text_problems(dict(host=host)))
    if problems:
        module.fail_json(msg="Nothing was changed: " + "; ".join(problems), changed=False)
    try:
        recorded, ours, _unit = observe_recorded(module, Instance(params["server_state_dir"], params["server_name"]))
        return port_state(recorded, ours, host, port)
    except (BadState, InvalidOption, SystemdFailed) as exc:
        module.fail_json(msg=str(exc), changed=False)


ARGUMENT_SPEC = dict(
    settings=dict(type="dict", required=True, options=SETTINGS),
    profile=dict(type="dict", required=True),
    host=dict(type="str", required=True),
    peers=dict(type="list", elements="dict", default=[], options=PEER),
    lock=dict(type="dict"),
    venv_probe=dict(type="str", required=True),
    adopt_probe=dict(type="str"),
    server_name=dict(type="str", default="sglang"),
    server_state_dir=dict(type="path", default=STATE_DIR),
)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    params = module.params
    settings = params["settings"]
    facts = minimal_facts(module)
    run = gpu_command_runner()
    facts["ansible_gpu"] = gather_host(module, run)
    health = gpu_health(module, settings, facts["ansible_gpu"], run)
    for warning in gpu_health_lines(health)["warnings"]:
        module.warn(warning)
    python = venv_python(module, settings, params["venv_probe"])
    observed = observe(
        settings,
        dict((name[len("ansible_"):], value) for name, value in facts.items()),
        facts["ansible_gpu"],
        python,
        fabric_packages(module),
        server_port_state(module, params),
        params["host"],
        params["peers"],
        gpu_health=health,
        loader=loader_libcuda(settings["library_paths"]),
        lock=params["lock"],
        tree=adopted_tree(settings, params["adopt_probe"], python, run),
    )
    report = evaluate(settings, params["profile"], observed)
    if not report["ok"]:
        module.fail_json(msg=refusal(params["host"], report), changed=False, ansible_facts=facts, gpu_health=health,
                         **report)
    module.exit_json(changed=False, ansible_facts=facts, gpu_health=health, **report)


if __name__ == "__main__":
    main()
