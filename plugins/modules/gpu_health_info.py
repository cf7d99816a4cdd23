#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: gpu_health_info
short_description: Tell a sick NVIDIA GPU from a healthy one before it serves
version_added: 0.1.0
author:
  - Blackwell GPU node maintainers (@blackwell-gpu-node)
description:
  - Reads, in one call, what the driver knows about each GPU's health and gives a verdict for the node,
    V(healthy), V(degraded), V(unhealthy), or V(unknown) when C(nvidia-smi) cannot report (no GPU, no
    C(nvidia-smi), a broken driver), with the reason. It never fails on such a host.
  - From C(nvidia-smi -q) - ECC errors (volatile and aggregate, correctable and uncorrectable), retired pages
    pending, remapped rows (pending, failure), the driver's recovery action, clock event (throttle) reasons,
    the PCIe link (generation and width, current and max, replays), temperature, power, the NVSwitch fabric's
    state and persistence mode.
  - From C(nvidia-smi nvlink -e) - the NVLink error counters, on GPUs that have NVLink.
  - "From C(nvidia-smi nvlink -s) - each link's state: an inactive link is C(nvlink_inactive) (V(unhealthy): NVIDIA's
    Health Validation calls any inactive link critical), a link slower than the node's fastest C(nvlink_slow)
    (V(degraded)). nvidia-smi's C(all links are inActive) counts only on a node whose GPUs have NVLink (a link's
    speed listed, or an NVSwitch fabric): a GPU without NVLink may print it."
  - "From the kernel log since boot (C(/dev/kmsg), else C(dmesg)) - the driver's C(NVRM: Xid) lines, one finding
    per Xid number, GPU and rating, and the driver's C(fallen off the bus) messages of a GPU without an Xid 79 line,
    counted as its Xid 79. Other C(NVRM:) lines (an FBHUB interrupt cleared at boot, the persistence mode notice,
    the module loading) are not errors and are not read as such. An Xid of a GPU that no longer answers (Xid 79)
    belongs to the node's RV(findings)."
  - "Each Xid is rated as NVIDIA's Xid catalogue (Catalog 610, every Xid of it) rates it - its resolution bucket
    (V(RESTART_APP) and V(IGNORE) are V(info); V(RESET_GPU), V(RESTART_BM), V(CONTACT_SUPPORT), V(WORKFLOW_XID_48),
    V(CHECK_MECHANICALS) are V(unhealthy)), decoded from its line where the catalogue says how - Xid 45 solo
    (V(WORKFLOW_XID_45), V(info): most often a process stopped) or following another Xid of its GPU, or naming it
    (V(IGNORE): that Xid's rating applies); Xid 74 by its register bits; Xid 144 to 150 (NVLink5) by their
    sub-component, intrInfo and errorStatus, or by their own Fatal or Nonfatal where no row of the decode matches;
    Xid 154 by the recovery action it announces. An Xid the catalogue gives no bucket is V(degraded)."
  - With O(dcgm_diag), C(dcgmi diag) at O(dcgm_diag_level) where NVIDIA DCGM is installed - each test's result
    (Pass, Fail, Warn, Skip, and the Error rows of its deployment checks), with its test's name and its message,
    rated by DCGM's own severity of the message (DCGM 4.6.0's, of every C(DCGM_FR_*) code) - ISOLATE and RESET
    V(unhealthy), TRIAGE and MONITOR V(degraded), CONFIG V(info); a message of none, Fail and Error V(unhealthy),
    Warn V(degraded). A targeted power test that missed its target by less than 1 W is no fault, and neither is
    C(DCGM_FR_NVLINK_DOWN) where C(nvidia-smi nvlink -s) shows the node has no NVLink. An exit status
    other than 0 with no failed test in the table is C(dcgm_diag_exit_status).
  - The same fault of the node's power, cooling, fabric or settings on every GPU (two or more) is one finding of the
    node with the GPUs in its C(gpus), not one per GPU; the power brake on every GPU is V(unhealthy).
  - With O(evidence_path), saved outputs instead of this host - see the option.
  - "With O(pcie_fabric), the PCIe fabric between the GPUs, without C(lspci) - each NVIDIA GPU's path up to its root
    port (C(/sys/bus/pci/devices)), the ACS Control register of each bridge on the paths between GPUs (from the
    bridge's configuration space in sysfs), the IOMMU (C(/proc/cmdline), C(/sys/kernel/iommu_groups) and each GPU's
    group type) and, where C(nvidia-smi) lists more than one GPU, C(nvidia-smi topo -p2p r) and C(w) and
    C(nvidia-smi topo -m). A fabric on which NCCL hangs or falls back is named with its fix. A single GPU gets no
    fabric finding, and neither does a pair of GPUs that C(nvidia-smi topo -m) links by NVLink."
  - "The fabric's findings, after NCCL's troubleshooting guide (PCI Access Control Services) and the CUDA
    programming guide (Host IOMMU Hardware, PCI Access Control Services, and VMs) - C(pcie_acs_redirect)
    (V(unhealthy)) where ACS on a bridge between GPUs redirects their peer-to-peer traffic (ReqRedir, CmpltRedir
    or EgressCtrl) while the IOMMU translates their DMA, on which NCCL hangs or crawls;
    C(pcie_acs_redirect_passthrough) (V(info)) for the same ACS with the IOMMU in passthrough or off;
    C(iommu_translating) (V(degraded)) where the IOMMU translates the GPUs' DMA (group type C(DMA) or C(DMA-FQ));
    C(p2p_not_supported) (V(degraded)) where C(nvidia-smi topo -p2p) says a pair cannot do peer-to-peer (CNS, GNS,
    TNS, NS, DR)."
  - Reading a bridge's ACS needs root - the kernel gives others the first 64 bytes of its configuration space. Then
    its ACS is V(unknown), said in RV(pcie_fabric.problems), and never a finding.
  - Each finding has a stable id, a severity, the evidence line, the action NVIDIA documents for it and NVIDIA's
    resolution bucket. The severities follow NVIDIA's Xid catalogue
    (U(https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html)), DCGM's severities and GPU Memory Error
    Management (U(https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/index.html)); an idle GPU's PCIe
    generation below its maximum is normal (the link slows down to save power), a link narrower than its maximum is
    not.
  - "What is read of each command's output is bounded, and each cut is said in RV(cut) - C(nvidia-smi -q) 4 MiB and
    65,536 lines (as gpu_facts reads it), C(nvidia-smi nvlink -e) and C(-s) 4 MiB and 100,000 lines each, C(dcgmi
    diag) 1 MiB, 10,000 lines and 64 result rows, the kernel log 1,048,576 lines; any line 4,096 characters; 256
    GPUs, 2,048 fields of a GPU in sections 8 deep, 64 non-zero NVLink counters and 64 links of a GPU shown; 1,024
    findings returned, the worst first (RV(counts) counts them all).
    A number of more than 20 digits is no number. Text taken from the commands and the kernel log is returned
    without terminal escape sequences and control characters, a GPU's C(uuid), C(name), C(persistence_mode),
    C(fabric_state) and C(fabric_status) cut to 256 bytes, any other text to 2 KiB a line."
  - Changes nothing.
extends_documentation_fragment:
  - blackwell.gpu_node.attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  platform:
    support: full
options:
  severity_overrides:
    description:
      - Severities to use instead of the built-in ones, by finding id, for example C(pcie_width_degraded) as
        V(info) on a host whose slots are x8 by design, or C(xid_13) as V(degraded).
      - "Known ids: C(ecc_uncorrectable), C(ecc_uncorrectable_aggregate), C(ecc_correctable),
        C(sram_threshold_exceeded), C(unrepairable_memory), C(memory_repair_pending), C(retired_pages_pending),
        C(row_remap_pending), C(row_remap_failure), C(gpu_reset_required), C(drain_and_reset_required),
        C(drain_p2p_required), C(node_reboot_required), C(hw_slowdown), C(hw_thermal_slowdown),
        C(hw_power_brake_slowdown), C(sw_thermal_slowdown), C(sw_power_cap), C(temperature_above_max_operating),
        C(power_limit_below_default), C(pcie_width_degraded), C(pcie_gen_below_max), C(pcie_replays),
        C(fabric_not_ready), C(fabric_error), C(fabric_unhealthy), C(persistence_mode_disabled),
        C(nvlink_errors), C(nvlink_inactive), C(nvlink_slow), C(dcgm_diag_failed), C(dcgm_diag_warning),
        C(dcgm_diag_exit_status), C(pcie_acs_redirect), C(pcie_acs_redirect_passthrough), C(iommu_translating),
        C(p2p_not_supported), and C(xid_<number>) for any Xid (each of its findings, whatever its line's rating)."
      - Values are V(unhealthy), V(degraded) or V(info). An unknown id or severity fails the task, naming it.
    type: dict
    default: {}
  kernel_log:
    description:
      - Read the kernel log for Xid errors since boot. It needs root (C(CAP_SYSLOG)); when it cannot be read,
        its C(problem) in RV(kernel_log) says why and the verdict rests on the rest.
    type: bool
    default: true
  dcgm_diag:
    description:
      - Run C(dcgmi diag -r) O(dcgm_diag_level) where C(dcgmi) is installed; where it is not, the C(problem) of
        RV(dcgm_diag) says so. Level 1, the default, takes seconds.
    type: bool
    default: true
  dcgm_diag_level:
    description:
      - The DCGM diagnostic level. Level 1 takes seconds and is NVIDIA's readiness check; levels 2 to 4 load the
        GPUs for minutes and need O(dcgm_diag_allow_long).
    type: int
    default: 1
    choices: [1, 2, 3, 4]
  dcgm_diag_allow_long:
    description: Allow O(dcgm_diag_level) above 1, on a node drained of traffic (and raise O(timeout) for it).
    type: bool
    default: false
  pcie_fabric:
    description:
      - Read the PCIe fabric between the GPUs (ACS on the bridges, the IOMMU, C(nvidia-smi)'s P2P matrix) and weigh
        it. Turn it off where the node's GPUs serve one each, or accept one finding with O(severity_overrides).
    type: bool
    default: true
  evidence_path:
    description:
      - "Assess saved outputs instead of this host: a directory of captured outputs, or an
        C(nvidia-bug-report.log.gz) (or C(.log)) as C(nvidia-bug-report.sh) writes it. Nothing is run, and neither
        the host's kernel log nor its PCIe fabric is read; O(kernel_log), O(dcgm_diag) and O(pcie_fabric) do not
        apply. RV(evidence) says what was found and what was not."
      - "A directory's files, each named for what it holds - C(nvidia-smi-q.txt) (C(nvidia-smi -q)), C(nvlink-e.txt)
        (C(nvidia-smi nvlink -e)), C(nvlink-s.txt) (C(nvidia-smi nvlink -s)), C(dcgmi-diag.txt) (C(dcgmi diag -r
        N)), C(dmesg.txt) or C(journalctl-k.txt) (the kernel log, any of C(dmesg)'s, C(journalctl -k)'s or
        C(/dev/kmsg)'s formats); an C(nvidia-bug-report.log.gz) in it gives what they do not."
      - "From a bug report - the output of C(nvidia-smi --query), C(nvidia-smi nvlink --errorcounters) and
        C(--status), and the kernel log of the boot it was written in (its C(dmesg:) section, else its C(journalctl
        -b -0) lines); earlier boots' lines are history and are not read. A report written with C(--safe-mode) holds
        no C(nvidia-smi) output. A bug report is read to its first 128 MiB of text, decompressed as it is read;
        a directory's file to its output's bound (the kernel log's 16 MiB)."
      - Files are opened without following a symbolic link, and only regular files are read.
      - Without the output of C(nvidia-smi -q), RV(state) is V(not_in_evidence) and the verdict V(unknown) unless
        what was found shows the node V(unhealthy).
    type: path
  timeout:
    description:
      - Seconds the whole check may take, its commands and the reading of what they print. Each command gets the
        time left and is killed at its end; what is not run or read by then is said in RV(cut), and parsing stops
        there. With anything left unread, the verdict is V(unknown) unless what was read shows the node
        V(unhealthy).
      - More than 0.
    type: int
    default: 120
notes:
  - Counters since boot or since the driver loaded stay until then - an Xid that a GPU reset resolved still shows
    until the next reboot; its finding says what it was, and RV(gpus[].findings[].count) how often.
seealso:
  - module: blackwell.gpu_node.gpu_facts
"""

EXAMPLES = r"""
- name: Know whether the node may serve
  blackwell.gpu_node.gpu_health_info:
  register: health

- name: Refuse a sick node
  ansible.builtin.assert:
    that: health.verdict in ['healthy', 'degraded']
    fail_msg: "{{ health.summary }}"

- name: A quick DCGM check too, and x8 slots accepted by design
  blackwell.gpu_node.gpu_health_info:
    dcgm_diag: true
    severity_overrides:
      pcie_width_degraded: info

- name: A node whose servers use one GPU each, where ACS redirection does not matter
  blackwell.gpu_node.gpu_health_info:
    severity_overrides:
      pcie_acs_redirect: info
      iommu_translating: info

- name: Assess a node's bug report on the controller
  blackwell.gpu_node.gpu_health_info:
    evidence_path: /var/tmp/node7/nvidia-bug-report.log.gz
  delegate_to: localhost
  register: saved
"""

RETURN = r"""
verdict:
  description:
    - V(healthy) (no finding worse than info), V(degraded) (serves, but something needs attention),
      V(unhealthy) (do not serve), or V(unknown) when C(nvidia-smi) could not report and nothing else showed
      the node unhealthy.
  returned: always
  type: str
  sample: healthy
reason:
  description: Why, in one line.
  returned: always
  type: str
  sample: 8 GPU(s), no unhealthy or degraded finding
summary:
  description:
    - The verdict and its reason in one line, then each unhealthy and each degraded finding in brief - whose (the
      GPU's index and PCI address), its id, its evidence, and its action's token.
  returned: always
  type: str
  sample: "unhealthy: 1 unhealthy and 0 degraded finding(s): GPU 1 (00000000:00:07.0) row_remap_failure (Remapped
    Rows > Remapping Failure Occurred: Yes) -> drain_and_open_case"
state:
  description:
    - What C(nvidia-smi -q) said of the driver, as in M(blackwell.gpu_node.gpu_facts) (V(ok), V(no_nvidia_smi),
      V(no_driver), ...); V(not_in_evidence) where O(evidence_path) holds no output of it.
  returned: always
  type: str
  sample: ok
counts:
  description: How many findings of each severity.
  returned: always
  type: dict
  sample: {unhealthy: 0, degraded: 0, info: 1}
gpus:
  description: One entry per GPU that C(nvidia-smi -q) lists, in its order.
  returned: always
  type: list
  elements: dict
  contains:
    index:
      description: The GPU's position in C(nvidia-smi -q).
      type: int
    bus_id:
      description: Its PCI address.
      type: str
      sample: "00000000:00:06.0"
    uuid:
      description: Its UUID.
      type: str
    name:
      description: Its product name.
      type: str
      sample: NVIDIA H200
    persistence_mode:
      description: V(Enabled) or V(Disabled).
      type: str
    pcie_gen_current:
      description: The PCIe generation now (lower at idle, which is normal).
      type: float
    pcie_gen_max:
      description: The highest PCIe generation of the GPU in this slot.
      type: float
    pcie_width_current:
      description: The PCIe lanes in use.
      type: float
    pcie_width_max:
      description: The PCIe lanes the GPU can use in this slot.
      type: float
    temperature_c:
      description: The GPU's temperature.
      type: float
    power_draw_w:
      description: Its power draw.
      type: float
    power_limit_w:
      description: Its power limit.
      type: float
    fabric_state:
      description: Its NVSwitch fabric state, null without a fabric.
      type: str
    fabric_status:
      description: Its NVSwitch fabric status, null without a fabric.
      type: str
    findings:
      description: What was found about this GPU.
      type: list
      elements: dict
      contains:
        id:
          description: The finding's stable id (see O(severity_overrides)).
          type: str
          sample: row_remap_pending
        severity:
          description: V(unhealthy), V(degraded) or V(info).
          type: str
        summary:
          description: What it means.
          type: str
        evidence:
          description: The line(s) that show it, as the command printed them (section path, field and value).
          type: str
          sample: "Remapped Rows > Pending: Yes"
        action:
          description:
            - What to do, as a token - V(none), V(restart_app), V(reset_gpu), V(reboot),
              V(drain_and_open_case), V(check_cooling_and_power), V(check_pcie_link), V(check_nvlink),
              V(check_fabric_manager), V(enable_persistence), V(look_up_xid), V(read_dcgm_diag),
              V(disable_acs_or_iommu_pt), V(disable_acs), V(iommu_passthrough), V(check_p2p),
              V(restart_fabric_manager), V(update_driver), V(restart_vm), V(check_uvm).
          type: str
          sample: reset_gpu
        advice:
          description: The action in words.
          type: str
        bucket:
          description:
            - "NVIDIA's resolution bucket - V(RESTART_APP), V(RESET_GPU), V(RESTART_BM), V(WORKFLOW_XID_48),
              V(WORKFLOW_NVLINK_ERR), V(WORKFLOW_NVLINK5_ERR), V(WORKFLOW_XID_45), V(CHECK_MECHANICALS), V(IGNORE),
              V(CONTACT_SUPPORT), V(UPDATE_SWFW), V(RESTART_VM), V(CHECK_UVM): an Xid's from NVIDIA's Xid catalogue
              (decoded from its line where the catalogue says how), a DCGM result's from DCGM's severity of its
              message (ISOLATE and TRIAGE V(CONTACT_SUPPORT), RESET V(RESET_GPU), MONITOR and CONFIG V(IGNORE)),
              any other finding's from its action (V(reset_gpu) V(RESET_GPU), V(reboot) and
              V(check_fabric_manager) V(RESTART_BM), V(drain_and_open_case), V(look_up_xid) and V(read_dcgm_diag)
              V(CONTACT_SUPPORT), V(check_pcie_link) and V(check_cooling_and_power) V(CHECK_MECHANICALS),
              V(check_nvlink) V(WORKFLOW_NVLINK_ERR), V(restart_app) V(RESTART_APP), the others V(IGNORE))."
          type: str
          sample: RESET_GPU
        gpu:
          description: The GPU's PCI address.
          type: str
        gpus:
          description: The PCI addresses of the GPUs it concerns - its own GPU's.
          type: list
          elements: str
        count:
          description: For an Xid, how many of its lines the kernel log holds for this GPU and rating.
          type: int
findings:
  description:
    - Findings that belong to no GPU of the list - Xids of a device C(nvidia-smi) no longer lists (fallen off the
      bus), C(dcgmi diag) results, the PCIe fabric's (between GPUs, so of the node), and a fault the same on every
      GPU. Same keys as a GPU's findings; C(gpu) is null but for an Xid. C(gpus) lists the GPUs a finding concerns -
      every GPU for a fault of all of them, those a DCGM result names (DCGM numbers them as C(nvidia-smi) does),
      none where it is the node's as a whole (the PCIe fabric's) or they are not known.
  returned: always
  type: list
  elements: dict
  sample:
    - id: pcie_acs_redirect
      severity: unhealthy
      evidence: "0000:02:08.0 (switch downstream port, above GPU 0 (0000:03:00.0)) ACSCtl: SrcValid+ TransBlk- ReqRedir+
        CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-; ...; IOMMU groups: GPU 0 (0000:03:00.0) group 12 (DMA-FQ),
        ...; kernel command line: intel_iommu=on"
      action: disable_acs_or_iommu_pt
      gpu: null
pcie_fabric:
  description:
    - The PCIe fabric between the GPUs as read; null with O(pcie_fabric=false).
  returned: always
  type: dict
  contains:
    gpus:
      description: Each NVIDIA GPU sysfs lists.
      type: list
      elements: dict
      contains:
        bdf:
          description: Its PCI address as sysfs writes it.
          type: str
          sample: "0000:03:00.0"
        driver:
          description: The kernel driver bound to it; only GPUs bound to C(nvidia) count as serving.
          type: str
          sample: nvidia
        path:
          description: The bridges above it, from its root port down.
          type: list
          elements: str
          sample: ["0000:00:00.0", "0000:01:00.0", "0000:02:08.0"]
        iommu_group:
          description: Its IOMMU group, null without one.
          type: str
        iommu_type:
          description: Its IOMMU group's type - V(DMA) or V(DMA-FQ) translate, V(identity) passes DMA through.
          type: str
    bridges:
      description: Each bridge on the GPUs' paths.
      type: list
      elements: dict
      contains:
        bdf:
          description: Its PCI address.
          type: str
        port:
          description: V(root port), V(switch upstream port), V(switch downstream port), ...; null when not read.
          type: str
        acs:
          description:
            - V(enabled), V(disabled), V(none) (no ACS capability), or V(unknown) when its configuration space could
              not be read that far (not root).
          type: str
        acs_control:
          description: The ACS Control register as lspci prints it, null unless read.
          type: str
          sample: SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-
        redirect:
          description: Whether ACS sends peer-to-peer traffic up to the root complex; null when not known.
          type: bool
    iommu:
      description:
        - C(mode) - what the IOMMU does with the serving GPUs' DMA (V(translating), V(passthrough), V(off),
          V(unknown)); C(groups) - how many IOMMU groups the kernel made; C(cmdline) - the kernel command line's
          IOMMU arguments.
      type: dict
      sample: {mode: passthrough, groups: 112, cmdline: ["amd_iommu=on", "iommu=pt"]}
    p2p:
      description:
        - C(read) and C(write) - C(nvidia-smi topo -p2p r) and C(w) as {GPUi - {GPUj - code}}, where C(nvidia-smi)
          lists more than one GPU; empty otherwise.
      type: dict
      sample: {read: {GPU0: {GPU1: OK}, GPU1: {GPU0: OK}}}
    links:
      description: C(nvidia-smi topo -m) as {GPUi - {GPUj - link}} (PIX, PXB, PHB, NODE, SYS, NV#).
      type: dict
    problems:
      description: What could not be read, and why (ACS not readable without root, a command that printed no matrix).
      type: list
      elements: str
cut:
  description:
    - What was not read whole, or not returned whole, each with its bound - an output, its lines or a line cut, GPUs
      or fields past their bounds, findings past 256 (the worst are returned), a command not run or parsing stopped
      at the end of O(timeout). Empty when everything was read.
  returned: always
  type: list
  elements: str
  sample: ["nvidia-smi -q: 6.3 MiB of output, cut to its first 4.0 MiB", "nvidia-smi -q: 1000 GPUs listed, the first
    256 assessed"]
xid_count:
  description: How many Xid lines the kernel log holds (the first 50 are read).
  returned: always
  type: int
kernel_log:
  description: Whether the kernel log was read (C(read)), from where (C(source)), and why not (C(problem)).
  returned: always
  type: dict
  sample: {read: true, source: /dev/kmsg, problem: null}
dcgm_diag:
  description:
    - The DCGM diagnostic's C(level), exit status C(rc) (null when it did not run), C(results) ({test, result,
      detail}, with the C(warning) of a result's message rows, its Warning or Error rows joined) and C(problem)
      (C(dcgmi) missing, not run by the end of O(timeout), or no result printed); null without O(dcgm_diag), or
      where O(evidence_path) holds no C(dcgmi diag) output (then C(level) and C(rc) are null).
  returned: always
  type: dict
evidence:
  description:
    - "With O(evidence_path) - C(path), C(found) (each input found, C(<input>: <file>), a bug report's section named
      after it) and C(missing) (each input it does not hold - C(nvidia-smi -q), C(nvidia-smi nvlink -e),
      C(nvidia-smi nvlink -s), C(dcgmi diag), C(the kernel log))."
  returned: with O(evidence_path)
  type: dict
  sample: {path: /var/tmp/node7/nvidia-bug-report.log.gz, found: ["nvidia-smi -q: nvidia-bug-report.log.gz, nvidia-smi
    --query", "the kernel log: nvidia-bug-report.log.gz, dmesg"], missing: [dcgmi diag]}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.errors import InvalidOption
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.owner import run_bounded
from ansible_collections.blackwell.gpu_node.plugins.module_utils._node.gpu_evidence import read_evidence
from ansible_collections.blackwell.gpu_node.plugins.module_utils._node.gpu_health import (
    Deadline,
    assess_evidence,
    check_options,
    gather,
)
from ansible_collections.blackwell.gpu_node.plugins.module_utils._node.kernel_log import read_kernel_log
from ansible_collections.blackwell.gpu_node.plugins.module_utils._node.pcie_fabric import read_fabric

ARGUMENT_SPEC = dict(
    severity_overrides=dict(type="dict", default={}),
    kernel_log=dict(type="bool", default=True),
    dcgm_diag=dict(type="bool", default=True),
    dcgm_diag_level=dict(type="int", default=1, choices=[1, 2, 3, 4]),
    dcgm_diag_allow_long=dict(type="bool", default=False),
    pcie_fabric=dict(type="bool", default=True),
    evidence_path=dict(type="path"),
    timeout=dict(type="int", default=120),
)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    params = module.params
    try:
        check_options(params["severity_overrides"], params["dcgm_diag_level"], params["dcgm_diag_allow_long"])
    except InvalidOption as exc:
        module.fail_json(msg=str(exc))
    if params["timeout"] <= 0:
        module.fail_json(msg="timeout=%d: give the seconds the check may take, more than 0" % params["timeout"])
    deadline = Deadline(params["timeout"])
    if params["evidence_path"]:
        try:
            evidence = read_evidence(params["evidence_path"], deadline)
        except InvalidOption as exc:
            module.fail_json(msg=str(exc))
        except OSError as exc:
            module.fail_json(msg="evidence_path=%s: %s" % (params["evidence_path"], exc.strerror or exc))
        module.exit_json(changed=False, **assess_evidence(evidence, params["severity_overrides"], deadline))

    def run(argv):
        # A command that cannot start is an answer like any other: the verdict says what it means.
        try:
            return run_bounded(argv, deadline.left())
        except OSError as exc:
            return 127, "", "%s: %s" % (argv[0], exc.strerror)

    health = gather(module.get_bin_path("nvidia-smi"), module.get_bin_path("dcgmi"), run,
                    lambda: read_kernel_log(seconds=deadline.left()), params, read_fabric, deadline)
    module.exit_json(changed=False, **health)


if __name__ == "__main__":
    main()
