# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Private to the blackwell.gpu_node collection: not a public API, it may change in any release.
"""NVIDIA's own ratings of what a GPU reports, as data: every Xid with the resolution bucket of NVIDIA's Xid
catalogue, the catalogue's rules for Xid 45, 48, 74, 144-150 and 154, NVML's GPU recovery actions and DCGM's
severities of its diagnostic's messages.

Data only. gpu_health rates each finding from it (its severity of ours, its bucket, its action); the monitoring
role's Xid alerts list the Xids it rates unhealthy and degraded (tests/unit/test_alert_rules_template.py holds
the role's defaults to it); docs/guides/fleet_operations.md describes it.

Sources (retrieved 2026-12-07):
- Xids: NVIDIA's "Analyzing Xid Errors with the Xid Catalog",
  https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html, and its spreadsheet
  Xid-Catalog.xlsx (sha256 7f70ce9684be0c9d...), the release labelled "Catalog 610" (the page prints no version
  or date). The rows were taken from yuhuiaws/GPU-Fault-Recovery-System
  src/gpu_fault/data/nvidia-xid-catalog-610.generated.yaml at c35f9e3a (a YAML of that spreadsheet, the
  spreadsheet NVIDIA/NVSentinel embeds with the same sha256) and checked against a text copy of NVIDIA's page and
  the bucket counts in NVIDIA/NVSentinel issue 1888.
- DCGM: NVIDIA/DCGM dcgmlib/dcgm_errors.h and dcgmlib/src/dcgm_errors.c at 72fa3fea (DCGM 4.6.0): each
  DCGM_FR_* code's severity, and its message format in every release since 2.2.6.
- NVML's recovery action: nvmlDeviceGpuRecoveryAction_t (nvml.h, as DCGM vendors it at 72fa3fea) and the
  nvidia-smi documentation's "GPU Recovery Action", https://docs.nvidia.com/deploy/nvidia-smi/index.html.
- Inactive NVLinks: NVIDIA Health Validation's nvlink_active check (max_inactive_nvlinks 0: critical),
  https://docs.nvidia.com/health-validation/reference/checks/nvlink.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

XID_CATALOGUE = "https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html"
XID_SPREADSHEET = ("https://docs.nvidia.com/deploy/xid-errors/_downloads/4586dadb59119a55d1e93a181caa4272/"
                   "Xid-Catalog.xlsx")
XID_SPREADSHEET_SHA256 = "7f70ce9684be0c9d98a367770341ccc1d8bca4465cebe42dab7e23d57df5d5a5"
XID_CATALOGUE_VERSION = "Catalog 610"
DCGM_SOURCE = "https://github.com/NVIDIA/DCGM/blob/72fa3feaa67d716a75323a8f47c34ff3ee73f824/dcgmlib/src/dcgm_errors.c"
DCGM_VERSION = "4.6.0"
RETRIEVED = "2026-12-07"

# The resolution buckets a finding carries: NVIDIA's names (the catalogue's "Resolution Bucket (Immediate
# Action)"). XID_154 and XID_154_EVAL are no finding's: an Xid 154 carries the bucket of the recovery action it
# announces, and an NVLink5 row of XID_154_EVAL is RESTART_APP (an Xid 154 of the same GPU is a finding of its own).
BUCKETS = (
    "RESTART_APP", "RESET_GPU", "RESTART_BM", "WORKFLOW_XID_48", "WORKFLOW_NVLINK_ERR", "WORKFLOW_NVLINK5_ERR",
    "WORKFLOW_XID_45", "CHECK_MECHANICALS", "IGNORE", "CONTACT_SUPPORT", "UPDATE_SWFW", "RESTART_VM", "CHECK_UVM"
)

# NVIDIA's words for each bucket (the catalogue's Guidance Class table; the two NVLink workflows point at their
# tables below).
BUCKET_TEXT = {
    "RESTART_APP": "The application should be restarted; RESET_GPU or RESTART_BM is not deemed necessary.",
    "RESET_GPU": "Refer to the GPU Debug Guidelines (docs.nvidia.com/deploy/gpu-debug-guidelines) for GPU Reset "
                 "capabilities & limitations; RESTART_BM is not deemed necessary.",
    "RESTART_BM": "Restart bare metal, system should be restarted",
    "WORKFLOW_XID_48": "Data Center Recovery Action - Solo: RESET_GPU; w/ 63 or 64: DRAIN_AND_RESET. Investigatory "
                       "- Solo: RUN_FIELDDIAG; Not Solo: the string tells the unit: FB -> follow Xid 63/64 "
                       "guidance; other SRAM -> check SRAM Error Threshold flag (nvidia-smi "
                       "<sram_threshold_exceeded>), if set RUN_FIELDDIAG.",
    "WORKFLOW_NVLINK_ERR": "Decode the registers the Xid 74 line prints, bit by bit (XID_74_BITS).",
    "WORKFLOW_NVLINK5_ERR": "Decode <intrInfo> and <errorStatus> with the Xid 144-150 Decode sheet (NVLINK5_DECODE).",
    "WORKFLOW_XID_45": "Solo: RESTART_FM / Not Solo: IGNORE (follow guidance in other Xid)",
    "CHECK_MECHANICALS": "Check to ensure that device seating and all applicable connections to it are secure.",
    "IGNORE": "No Action required",
    "CONTACT_SUPPORT": "Please contact your support organization for further investigation.",
    "UPDATE_SWFW": "Update Firmware and Software to latest versions",
    "RESTART_VM": "VM owning the affected GPU must be restarted; RESET_GPU or RESTART_BM is not deemed necessary.",
    "CHECK_UVM": "If UVM/vGPU is being utilized, RESET_GPU; otherwise IGNORE",
}

# Xid: (mnemonic, NVIDIA's description, immediate bucket; None where this release of the catalogue leaves it
# empty). "Unused" is NVIDIA's: a code deprecated, or of GPUs older than Ampere.
XIDS = {
    1: ("ROBUST_CHANNEL_FIFO_ERROR_FIFO_METHOD", "Unused", "CONTACT_SUPPORT"),
    2: ("ROBUST_CHANNEL_FIFO_ERROR_SW_METHOD", "Unused", "CONTACT_SUPPORT"),
    3: ("ROBUST_CHANNEL_FIFO_ERROR_UNK_METHOD", "Unused", "CONTACT_SUPPORT"),
    4: ("ROBUST_CHANNEL_FIFO_ERROR_CHANNEL_BUSY", "Unused", "CONTACT_SUPPORT"),
    5: ("ROBUST_CHANNEL_FIFO_ERROR_RUNOUT_OVERFLOW", "Unused", "CONTACT_SUPPORT"),
    6: ("ROBUST_CHANNEL_FIFO_ERROR_PARSE_ERR", "Unused", "CONTACT_SUPPORT"),
    7: ("ROBUST_CHANNEL_FIFO_ERROR_PTE_ERR", "Unused", "CONTACT_SUPPORT"),
    8: ("ROBUST_CHANNEL_FIFO_ERROR_IDLE_TIMEOUT", "GPU stopped processing", "RESTART_APP"),
    9: ("ROBUST_CHANNEL_GR_ERROR_INSTANCE", "Unused", "CONTACT_SUPPORT"),
    10: ("ROBUST_CHANNEL_GR_ERROR_SINGLE_STEP", "Unused", "CONTACT_SUPPORT"),
    11: ("ROBUST_CHANNEL_GR_ERROR_MISSING_HW", "Invalid or corrupted push buffer stream", "RESTART_APP"),
    12: ("ROBUST_CHANNEL_GR_ERROR_SW_METHOD", "Unused", "CONTACT_SUPPORT"),
    13: ("ROBUST_CHANNEL_GR_EXCEPTION / ROBUST_CHANNEL_GR_ERROR_SW_NOTIFY", "Graphics Engine Exception", "RESTART_APP"),
    14: ("ROBUST_CHANNEL_FAKE_ERROR", "Unused", "IGNORE"),
    15: ("ROBUST_CHANNEL_SCANLINE_TIMEOUT", "Unused", "CONTACT_SUPPORT"),
    16: ("ROBUST_CHANNEL_VBLANK_CALLBACK_TIMEOUT", "Unused", "CONTACT_SUPPORT"),
    17: ("ROBUST_CHANNEL_PARAMETER_ERROR", "Unused", "CONTACT_SUPPORT"),
    18: ("ROBUST_CHANNEL_BUS_MASTER_TIMEOUT_ERROR", "Unused", "CONTACT_SUPPORT"),
    19: ("ROBUST_CHANNEL_DISP_MISSED_NOTIFIER", "Unused", "CONTACT_SUPPORT"),
    20: ("ROBUST_CHANNEL_MPEG_ERROR_SW_METHOD", "Unused", "CONTACT_SUPPORT"),
    21: ("ROBUST_CHANNEL_ME_ERROR_SW_METHOD", "Unused", "CONTACT_SUPPORT"),
    22: ("ROBUST_CHANNEL_VP_ERROR_SW_METHOD", "Unused", "CONTACT_SUPPORT"),
    23: ("ROBUST_CHANNEL_RC_LOGGING_ENABLED", "Unused", "CONTACT_SUPPORT"),
    24: ("ROBUST_CHANNEL_GR_SEMAPHORE_TIMEOUT", "Unused", "CONTACT_SUPPORT"),
    25: ("ROBUST_CHANNEL_GR_ILLEGAL_NOTIFY", "Invalid or illegal push buffer stream", "RESTART_APP"),
    26: ("ROBUST_CHANNEL_FIFO_ERROR_FBISTATE_TIMEOUT", "Unused", "CONTACT_SUPPORT"),
    27: ("ROBUST_CHANNEL_VP_ERROR", "Unused", "CONTACT_SUPPORT"),
    28: ("ROBUST_CHANNEL_VP2_ERROR", "Unused", "CONTACT_SUPPORT"),
    29: ("ROBUST_CHANNEL_BSP_ERROR", "Unused", "CONTACT_SUPPORT"),
    30: ("ROBUST_CHANNEL_BAD_ADDR_ACCESS", "Unused", "CONTACT_SUPPORT"),
    31: ("ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT", "GPU memory page fault", "RESTART_APP"),
    32: ("ROBUST_CHANNEL_PBDMA_ERROR", "Invalid or corrupted push buffer stream", "RESTART_APP"),
    33: ("ROBUST_CHANNEL_SEC_ERROR", "Unused", "CONTACT_SUPPORT"),
    34: ("ROBUST_CHANNEL_MSVLD_ERROR", "Unused", "CONTACT_SUPPORT"),
    35: ("ROBUST_CHANNEL_MSPDEC_ERROR", "Unused", "CONTACT_SUPPORT"),
    36: ("ROBUST_CHANNEL_MSPPP_ERROR", "Unused", "CONTACT_SUPPORT"),
    37: ("ROBUST_CHANNEL_FECS_ERR_UNIMP_FIRMWARE_METHOD", "Driver firmware error", "IGNORE"),
    38: ("ROBUST_CHANNEL_FECS_ERR_WATCHDOG_TIMEOUT", "Driver firmware error", "IGNORE"),
    39: ("ROBUST_CHANNEL_CE0_ERROR", "Copy Engine Exception", "RESTART_APP"),
    40: ("ROBUST_CHANNEL_CE1_ERROR", "Copy Engine Exception", "RESTART_APP"),
    41: ("ROBUST_CHANNEL_CE2_ERROR", "Copy Engine Exception", "RESTART_APP"),
    42: ("ROBUST_CHANNEL_VIC_ERROR", "Unused", "CONTACT_SUPPORT"),
    43: ("ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR", "GPU stopped processing", "IGNORE"),
    44: ("ROBUST_CHANNEL_GR_FAULT_DURING_CTXSW", "Graphics Engine fault during context switch", "IGNORE"),
    45: ("ROBUST_CHANNEL_PREEMPTIVE_REMOVAL",
         "Preemptive cleanup, due to previous errors -- Most likely to see when running multiple cuda applications "
         "and hitting a DBE",
         "WORKFLOW_XID_45"),
    46: ("ROBUST_CHANNEL_GPU_TIMEOUT_ERROR", "GPU stopped processing", "RESET_GPU"),
    47: ("ROBUST_CHANNEL_NVENC0_ERROR", "Unused", "CONTACT_SUPPORT"),
    48: ("ROBUST_CHANNEL_GPU_ECC_DBE", "Double Bit ECC Error", "WORKFLOW_XID_48"),
    49: ("SILENT_RUNNING_CONSTANT_LEVEL_SET_BY_REGISTRY", "Unused", "CONTACT_SUPPORT"),
    50: ("SILENT_RUNNING_LEVEL_TRANSITION_DUE_TO_RC_ERROR", "Unused", "CONTACT_SUPPORT"),
    51: ("SILENT_RUNNING_STRESS_TEST_FAILURE", "Unused", "CONTACT_SUPPORT"),
    52: ("SILENT_RUNNING_LEVEL_TRANS_DUE_TO_TEMP_RISE", "Unused", "CONTACT_SUPPORT"),
    53: ("SILENT_RUNNING_TEMP_REDUCED_CLOCKING", "Unused", "CONTACT_SUPPORT"),
    54: ("SILENT_RUNNING_PWR_REDUCED_CLOCKING",
         "Auxiliary power is not connected to the GPU board",
         "CHECK_MECHANICALS"),
    55: ("SILENT_RUNNING_TEMPERATURE_READ_ERROR", "Unused", "CONTACT_SUPPORT"),
    56: ("DISPLAY_CHANNEL_EXCEPTION", "Unused", "CONTACT_SUPPORT"),
    57: ("FB_LINK_TRAINING_FAILURE_ERROR", "Unused", "CONTACT_SUPPORT"),
    58: ("FB_MEMORY_ERROR", "Unused", "CONTACT_SUPPORT"),
    59: ("PMU_ERROR", "Unused", "CONTACT_SUPPORT"),
    60: ("ROBUST_CHANNEL_SEC2_ERROR", "Video processor exception", "RESTART_APP"),
    61: ("PMU_BREAKPOINT", "Unused", "CONTACT_SUPPORT"),
    62: ("PMU_HALT_ERROR", "Internal micro-controller halt (newer drivers)", "RESET_GPU"),
    63: ("INFOROM_DRAM_RETIREMENT_EVENT", "GPU memory remapping event", "IGNORE"),
    64: ("INFOROM_DRAM_RETIREMENT_FAILURE", "GPU memory remapping failure", "RESET_GPU"),
    65: ("ROBUST_CHANNEL_NVENC1_ERROR", "Unused", "CONTACT_SUPPORT"),
    66: ("ROBUST_CHANNEL_FECS_ERR_REG_ACCESS_VIOLATION", "Illegal access by driver", "IGNORE"),
    67: ("ROBUST_CHANNEL_FECS_ERR_VERIF_VIOLATION", "Illegal access by driver", "IGNORE"),
    68: ("ROBUST_CHANNEL_NVDEC0_ERROR", "NVDEC0 Exception", "RESTART_APP"),
    69: ("ROBUST_CHANNEL_GR_CLASS_ERROR", "Graphics Engine class error", "RESTART_APP"),
    70: ("ROBUST_CHANNEL_CE3_ERROR", "CE3: Unknown Error", "RESTART_APP"),
    71: ("ROBUST_CHANNEL_CE4_ERROR", "CE4: Unknown Error", "RESTART_APP"),
    72: ("ROBUST_CHANNEL_CE5_ERROR", "CE5: Unknown Error", "RESTART_APP"),
    73: ("ROBUST_CHANNEL_NVENC2_ERROR", "Unused", "CONTACT_SUPPORT"),
    74: ("NVLINK_ERROR", "NVLINK Error", "WORKFLOW_NVLINK_ERR"),
    75: ("ROBUST_CHANNEL_CE6_ERROR", "CE6: Unknown Error", "RESTART_APP"),
    76: ("ROBUST_CHANNEL_CE7_ERROR", "CE7: Unknown Error", "RESTART_APP"),
    77: ("ROBUST_CHANNEL_CE8_ERROR", "CE8: Unknown Error", "RESTART_APP"),
    78: ("VGPU_START_ERROR", "vGPU Start Error", "UPDATE_SWFW"),
    79: ("ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS", "GPU has fallen off the bus", "RESTART_BM"),
    80: ("PBDMA_PUSHBUFFER_CRC_MISMATCH", "Corrupted data sent to GPU", "RESTART_APP"),
    81: ("ROBUST_CHANNEL_VGA_SUBSYSTEM_ERROR", "Unused", "CONTACT_SUPPORT"),
    82: ("ROBUST_CHANNEL_NVJPG0_ERROR", "NVJPG0 Error", "RESTART_APP"),
    83: ("ROBUST_CHANNEL_NVDEC1_ERROR", "NVDEC1 Error", "RESTART_APP"),
    84: ("ROBUST_CHANNEL_NVDEC2_ERROR", "NVDEC2 Error", "RESTART_APP"),
    85: ("ROBUST_CHANNEL_CE9_ERROR", "CE9: Unknown Error", "RESTART_APP"),
    86: ("ROBUST_CHANNEL_OFA0_ERROR", "OFA Exception", "RESTART_APP"),
    87: ("NVTELEMETRY_DRIVER_REPORT", "Unused", "CONTACT_SUPPORT"),
    88: ("ROBUST_CHANNEL_NVDEC3_ERROR", "NVDEC3 Error", "RESTART_APP"),
    89: ("ROBUST_CHANNEL_NVDEC4_ERROR", "NVDEC4 Error", "RESTART_APP"),
    90: ("LTC_ERROR", "Unused", "CONTACT_SUPPORT"),
    91: ("RESERVED_XID", "Unused", "CONTACT_SUPPORT"),
    92: ("EXCESSIVE_SBE_INTERRUPTS", "High single-bit ECC error rate", "IGNORE"),
    93: ("INFOROM_ERASE_LIMIT_EXCEEDED", "Non-fatal violation of provisioned InfoROM wear limit", "IGNORE"),
    94: ("ROBUST_CHANNEL_CONTAINED_ERROR", "Contained memory error", "RESTART_APP"),
    95: ("ROBUST_CHANNEL_UNCONTAINED_ERROR", "Uncontained memory error", "RESET_GPU"),
    96: ("ROBUST_CHANNEL_NVDEC5_ERROR", "NVDEC5 Error", "RESTART_APP"),
    97: ("ROBUST_CHANNEL_NVDEC6_ERROR", "NVDEC6 Error", "RESTART_APP"),
    98: ("ROBUST_CHANNEL_NVDEC7_ERROR", "NVDEC7 Error", "RESTART_APP"),
    99: ("ROBUST_CHANNEL_NVJPG1_ERROR", "NVJPG1 Error", "RESTART_APP"),
    100: ("ROBUST_CHANNEL_NVJPG2_ERROR", "NVJPG2 Error", "RESTART_APP"),
    101: ("ROBUST_CHANNEL_NVJPG3_ERROR", "NVJPG3 Error", "RESTART_APP"),
    102: ("ROBUST_CHANNEL_NVJPG4_ERROR", "NVJPG4 Error", "RESTART_APP"),
    103: ("ROBUST_CHANNEL_NVJPG5_ERROR", "NVJPG5 Error", "RESTART_APP"),
    104: ("ROBUST_CHANNEL_NVJPG6_ERROR", "NVJPG6 Error", "RESTART_APP"),
    105: ("ROBUST_CHANNEL_NVJPG7_ERROR", "NVJPG7 Error", "RESTART_APP"),
    106: ("SMBPBI_TEST_MESSAGE", "SMBPBI Test Message", "IGNORE"),
    107: ("SMBPBI_TEST_MESSAGE_SILENT", "SMBPBI Test Message Silent", "IGNORE"),
    108: ("NVLINK_REMOTE_TRANSLATION_ERROR", "Unused", "IGNORE"),
    109: ("ROBUST_CHANNEL_CTXSW_TIMEOUT_ERROR", "Context Switch Timeout Error", "RESET_GPU"),
    110: ("SEC_FAULT_ERROR", "Security Fault Error", "RESET_GPU"),
    111: ("BUNDLE_ERROR_EVENT", "Unused", "CONTACT_SUPPORT"),
    112: ("DISP_SUPERVISOR_ERROR", "Unused", "CONTACT_SUPPORT"),
    113: ("DP_LT_FAILURE", "Unused", "CONTACT_SUPPORT"),
    114: ("HEAD_RG_UNDERFLOW", "Unused", "CONTACT_SUPPORT"),
    115: ("CORE_CHANNEL_REGS", "Unused", "CONTACT_SUPPORT"),
    116: ("WINDOW_CHANNEL_REGS", "Unused", "CONTACT_SUPPORT"),
    117: ("CURSOR_CHANNEL_REGS", "Unused", "CONTACT_SUPPORT"),
    118: ("HEAD_REGS", "Unused", "CONTACT_SUPPORT"),
    119: ("GSP_RPC_TIMEOUT", "GSP RPC Timeout", "RESET_GPU"),
    120: ("GSP_ERROR", "GSP Error", "RESET_GPU"),
    121: ("C2C_ERROR", "C2C Error", "IGNORE"),
    122: ("SPI_PMU_RPC_READ_FAIL", "Unused", "CONTACT_SUPPORT"),
    123: ("SPI_PMU_RPC_WRITE_FAIL", "Unused", "CONTACT_SUPPORT"),
    124: ("SPI_PMU_RPC_ERASE_FAIL", "Unused", "CONTACT_SUPPORT"),
    125: ("INFOROM_FS_ERROR", "Unused", "CONTACT_SUPPORT"),
    126: ("ROBUST_CHANNEL_CE10_ERROR", "CE10: Unknown Error", "RESTART_APP"),
    127: ("ROBUST_CHANNEL_CE11_ERROR", "CE11: Unknown Error", "RESTART_APP"),
    128: ("ROBUST_CHANNEL_CE12_ERROR", "CE12: Unknown Error", "RESTART_APP"),
    129: ("ROBUST_CHANNEL_CE13_ERROR", "CE13: Unknown Error", "RESTART_APP"),
    130: ("ROBUST_CHANNEL_CE14_ERROR", "CE14: Unknown Error", "RESTART_APP"),
    131: ("ROBUST_CHANNEL_CE15_ERROR", "CE15: Unknown Error", "RESTART_APP"),
    132: ("ROBUST_CHANNEL_CE16_ERROR", "CE16: Unknown Error", "RESTART_APP"),
    133: ("ROBUST_CHANNEL_CE17_ERROR", "CE17: Unknown Error", "RESTART_APP"),
    134: ("ROBUST_CHANNEL_CE18_ERROR", "CE18: Unknown Error", "RESTART_APP"),
    135: ("ROBUST_CHANNEL_CE19_ERROR", "CE19: Unknown Error", "RESTART_APP"),
    136: ("ALI_TRAINING_FAIL", "Link Training Failed", "RESET_GPU"),
    137: ("NVLINK_PRIV_ERR", "NVLink Privilege Error", "IGNORE"),
    138: ("ROBUST_CHANNEL_DLA_ERROR", "Unused", "CONTACT_SUPPORT"),
    139: ("ROBUST_CHANNEL_OFA1_ERROR", "OFA1 Error", "RESTART_APP"),
    140: ("UNRECOVERABLE_ECC_ERROR_ESCAPE", "ECC Unrecovered Error", "RESET_GPU"),
    141: ("ROBUST_CHANNEL_FAST_PATH_ERROR", "CUDA Fast Path Error", "IGNORE"),
    142: ("ROBUST_CHANNEL_NVENC3_ERROR", "NVENC3 Error", "CONTACT_SUPPORT"),
    143: ("GPU_INIT_ERROR", "GPU Initialization Error", "RESET_GPU"),
    144: ("NVLINK_SAW_ERROR", "NVLINK: SAW Error", "WORKFLOW_NVLINK5_ERR"),
    145: ("NVLINK_RLW_ERROR", "NVLINK: RLW Error", "WORKFLOW_NVLINK5_ERR"),
    146: ("NVLINK_TLW_ERROR", "NVLINK: TLW Error", "WORKFLOW_NVLINK5_ERR"),
    147: ("NVLINK_TREX_ERROR", "NVLINK: TREX Error", "WORKFLOW_NVLINK5_ERR"),
    148: ("NVLINK_NVLPW_CTRL_ERROR", "NVLINK: NVLPW_CTRL Error", "WORKFLOW_NVLINK5_ERR"),
    149: ("NVLINK_NETIR_ERROR", "NVLINK: NETIR Error", "WORKFLOW_NVLINK5_ERR"),
    150: ("NVLINK_MSE_ERROR", "NVLINK: MSE Error", "WORKFLOW_NVLINK5_ERR"),
    151: ("ROBUST_CHANNEL_KEY_ROTATION_ERROR", "Key rotation Error", "RESTART_VM"),
    152: ("ROBUST_CHANNEL_DLA_SMMU_ERROR", "DLA SMMU Error", "IGNORE"),
    153: ("ROBUST_CHANNEL_DLA_TIMEOUT", "DLA timeout Error", "IGNORE"),
    154: ("GPU_RECOVERY_ACTION_CHANGED", "GPU Recovery Action Changed", "XID_154"),
    155: ("NVLINK_SW_DEFINED_ERROR", "NVLINK: SW Defined Error", "RESET_GPU"),
    156: ("RESOURCE_RETIREMENT_EVENT", "Resource Retirement Event", "RESET_GPU"),
    157: ("RESOURCE_RETIREMENT_FAILURE", "Resource Retirement Failure", "IGNORE"),
    158: ("GPU_FATAL_TIMEOUT", "GPU Fatal Timeout", "RESET_GPU"),
    159: ("ROBUST_CHANNEL_CHI_NON_DATA_ERROR", "CHI Non-Data Error", "CHECK_UVM"),
    160: ("CHANNEL_RETIREMENT_EVENT", "Channel Retirement Event", "IGNORE"),
    161: ("CHANNEL_RETIREMENT_FAILURE", "Channel Retirement Failure", "IGNORE"),
    162: ("PSHC_REENGAGED", "Power Smoothing HW Circuitry capability reengaged", None),
    163: ("PSHC_DISENGAGED", "Power Smoothing HW Circuitry capability disengaged", None),
    164: ("PSHC_LOW_LIFETIME", "Power Smoothing HW Circuitry low lifetime reached", None),
    165: ("PSHC_ZERO_LIFETIME", "Power Smoothing HW Circuitry lifetime exhausted", None),
    166: ("NVLINK_SECURE_CRYPTO_ERR",
          "CC traffic seen prior to link properly being configured for encrypted traffic",
          None),
    167: ("PCIE_FATAL_TIMEOUT", "PCIE_FATAL_TIMEOUT", None),
    168: ("REDUCED_GPU_MEMORY_CAPACITY", "Errors found in WPR (write protected region)", None),
    169: ("SEC2_HALT_ERROR", "Internal micro-controller halt", None),
    170: ("NVLINK_SECURE_OTHER", "Interrupt seen in CC mode", None),
    171: ("UNCORRECTABLE_DRAM_ERROR",
          "Additional to Xid 48 providing more details on particulars of fault to differentiate DRAM/SRAM",
          None),
    172: ("UNCORRECTABLE_SRAM_ERROR",
          "Additional to Xid 48 providing more details on particulars of fault to differentiate DRAM/SRAM",
          None),
}

# Xid 45 (WORKFLOW_XID_45), NVIDIA's rule: "Solo: RESTART_FM / Not Solo: IGNORE (follow guidance in other Xid)".
# Not solo: another Xid of the same GPU came before it, or its line names its cause ("caused by previous Xid N",
# as drivers since 590 print it). The catalogue sets no time window; a solo 45 is most often a process stopped or
# killed ("Control-C, GPU resets, sigkill", its trigger says).
XID_45_CAUSE = "caused by previous Xid "

# Xid 74 (WORKFLOW_NVLINK_ERR): NVIDIA decodes the bits of the registers printed in the line (seven hex values;
# the first, third, fourth and fifth are valid on Hopper). (register index from 0, bits, what NVIDIA says to do as
# a severity of ours): info "can be safely ignored" or "continue operation"; degraded where NVIDIA says to follow
# the other errors, or to report once it repeats; unhealthy where it says likely hardware (check the link's
# mechanical connections, reseat) or not expected in production. A set bit NVIDIA does not list: "report a bug",
# unhealthy.
XID_74_BITS = (
    # Can be safely ignored.
    (0, (0, 23, 30), "info"),
    # Generally sympathetic/secondary; if with other bits or other Xid/SXid follow those; if solo, report a bug.
    (0, (1, 20), "degraded"),
    # Likely HW issue with ECC/Parity; if seen more than 2 times on the same link, report a bug.
    (0, (4, 5), "degraded"),
    # Possibly HW: check link mechanical connections, re-seat if field resolution required; run diags if it persists;
    # report a bug if it persists and diags pass.
    (0, (8, 9, 12, 16, 17, 24, 28), "unhealthy"),
    # Marginal channel SI issue: follow accompanying errors first; else check mechanical connections, run Field Diags
    # and report a bug.
    (0, (21, 22), "degraded"),
    # If seen repeatedly, report a bug.
    (0, (27, 29), "degraded"),
    # Likely HW ECC/Parity; more than 2 times on the same link -> report a bug.
    (2, (0, 1, 2, 6), "degraded"),
    # Not expected in production; report a bug.
    (2, (13,), "unhealthy"),
    # If repeated, run Field Diags and report a bug.
    (2, (16, 19), "degraded"),
    # If repeated, report a bug.
    (2, (17, 18), "degraded"),
    # Generally sympathetic/secondary; follow other errors; solo -> report a bug.
    (3, (16, 17), "degraded"),
    # Sympathetic/secondary, though a reset of the fabric is required; follow other errors; solo -> report a bug.
    (3, (18,), "unhealthy"),
    # Likely HW ECC/Parity; more than 2 times on the same link -> report a bug.
    (4, (18, 19, 21, 22, 24, 25, 27, 28), "degraded"),
    # ECC error threshold exceeded, no uncorrectable error; continue operation (Field Diags optional).
    (4, (20, 23, 26, 29), "info"),
)

# Xid 144-150 (WORKFLOW_NVLINK5_ERR), NVIDIA's "Xid 144-150 Decode" sheet. A line reads
# "<xid>, <sub-component> <Fatal|Nonfatal> XC<n> i<n> Link <n> (<intrInfo> <errorStatus> ...)"; a row matches
# when intrInfo has the row's bits (its pattern for drivers before R575, or that for R575 and later: the driver's
# version is not always at hand, and the sub-component's bits differ between them) and errorStatus is one of the
# row's (None: any). Each row: (xid, sub-components, (mask, bits) before R575, (mask, bits) from R575, error
# statuses, bucket, NVIDIA's severity, the (mask, bits) pairs of its second action (RESET_GPU) or None).
# A line no row matches (registers left out or anonymised) is rated by its own word: Fatal unhealthy, Nonfatal
# degraded.
NVLINK5_DECODE = (
    (144, ("SAW_MVB",), (0x03f003ff, 0x00000021), (0x03f0007f, 0x00000001), (0x00000001,), "IGNORE", "Non-fatal", None),
    (144, ("SAW_MVB",), (0x03f003ff, 0x00000021), (0x03f0007f, 0x00000001), (0x00000002,), "RESET_GPU", "Fatal", None),
    (144, ("SAW_MVB",), (0x03f003ff, 0x00000021), (0x03f0007f, 0x00000001), (0x00000004,), "IGNORE", "Non-fatal", None),
    (144, ("SAW_MVB",), (0x03f003ff, 0x00000021), (0x03f0007f, 0x00000001), (0x00000008,), "IGNORE", "Non-fatal", None),
    (144, ("SAW_MVB",), (0x03f003ff, 0x00000021), (0x03f0007f, 0x00000001), (0x00000010,), "RESET_GPU", "Fatal", None),
    (144, ("SAW_MVB",), (0x03f003ff, 0x00000021), (0x03f0007f, 0x00000001), (0x00000020,), "IGNORE", "Non-fatal", None),
    (145, ("RLW_CTRL",), (0x03f003ff, 0x00000062), (0x03f0007f, 0x00000003), (0x80000000,),
     "IGNORE", "Non-fatal", None),
    (145, ("RLW_REMAP",), (0x03f003ff, 0x00000082), (0x03f0007f, 0x00000004), (0x00000001,),
     "XID_154_EVAL", "Non-fatal", None),
    (145, ("RLW_REMAP",), (0x03f003ff, 0x00000082), (0x03f0007f, 0x00000004), (0x00000002,),
     "XID_154_EVAL", "Non-fatal", None),
    (145, ("RLW_REMAP",), (0x03f003ff, 0x00000082), (0x03f0007f, 0x00000004), (0x00000004,),
     "XID_154_EVAL", "Non-fatal", None),
    (145, ("RLW_REMAP",), (0x03f003ff, 0x00000082), (0x03f0007f, 0x00000004), (0x00000008,),
     "XID_154_EVAL", "Non-fatal", None),
    (145, ("RLW_REMAP",), (0x03f003ff, 0x00000082), (0x03f0007f, 0x00000004), (0x00000010,),
     "XID_154_EVAL", "Non-fatal", None),
    (145, ("RLW_REMAP",), (0x03f003ff, 0x00000082), (0x03f0007f, 0x00000004), (0x00000020,),
     "XID_154_EVAL", "Non-fatal", None),
    (145, ("RLW_REMAP",), (0x03f003ff, 0x00000082), (0x03f0007f, 0x00000004), (0x00000040,),
     "RESET_GPU", "Fatal", None),
    (145, ("RLW_REMAP",), (0x03f003ff, 0x00000082), (0x03f0007f, 0x00000004), (0x00000080,),
     "RESET_GPU", "Fatal", None),
    (145, ("RLW_REMAP",), (0x03f003ff, 0x00000082), (0x03f0007f, 0x00000004), (0x00000100,),
     "IGNORE", "Non-fatal", None),
    (145, ("RLW_REMAP",), (0x03f003ff, 0x00000082), (0x03f0007f, 0x00000004), (0x00000200,),
     "IGNORE", "Non-fatal", None),
    (145, ("RLW_REMAP",), (0x03f003ff, 0x00000082), (0x03f0007f, 0x00000004), (0x80000000,),
     "IGNORE", "Non-fatal", None),
    (145, ("RLW_RSPCOL",), (0x03f003ff, 0x000000a2), (0x03f0007f, 0x00000005), (0x00000001,),
     "IGNORE", "Non-fatal", None),
    (145, ("RLW_RSPCOL",), (0x03f003ff, 0x000000a2), (0x03f0007f, 0x00000005), (0x00000002,),
     "RESET_GPU", "Fatal", None),
    (145, ("RLW_RSPCOL",), (0x03f003ff, 0x000000a2), (0x03f0007f, 0x00000005), (0x80000000,),
     "IGNORE", "Non-fatal", None),
    (145, ("RLW_RXPIPE",), (0x03f007ff, 0x000000c2), (0x03f000ff, 0x00000006), (0x00000001,),
     "IGNORE", "Non-fatal*", ((0x03f007ff, 0x000004c2), (0x03f000ff, 0x00000086))),
    (145, ("RLW_RXPIPE",), (0x03f007ff, 0x000000c2), (0x03f000ff, 0x00000006), (0x00000002,),
     "IGNORE", "Non-fatal*", ((0x03f007ff, 0x000004c2), (0x03f000ff, 0x00000086))),
    (145, ("RLW_RXPIPE",), (0x03f007ff, 0x000000c2), (0x03f000ff, 0x00000006), (0x00000004,),
     "IGNORE", "Non-fatal*", ((0x03f007ff, 0x000004c2), (0x03f000ff, 0x00000086))),
    (145, ("RLW_RXPIPE",), (0x03f003ff, 0x000000c2), (0x03f0007f, 0x00000006), (0x00000008,),
     "IGNORE", "Non-fatal", None),
    (145, ("RLW_RXPIPE",), (0x03f003ff, 0x000000c2), (0x03f0007f, 0x00000006), (0x80000000,),
     "IGNORE", "Non-fatal", None),
    (145, ("RLW_SRC_TRACK",), (0x03f003ff, 0x000000e2), (0x03f0007f, 0x00000007), (0x00000001,),
     "RESET_GPU", "Fatal", None),
    (145, ("RLW_SRC_TRACK",), (0x03f003ff, 0x000000e2), (0x03f0007f, 0x00000007), (0x00000002,),
     "IGNORE", "Non-fatal", None),
    (145, ("RLW_SRC_TRACK",), (0x03f003ff, 0x000000e2), (0x03f0007f, 0x00000007), (0x00000004,),
     "XID_154_EVAL", "Non-fatal", None),
    (145, ("RLW_SRC_TRACK",), (0x03f003ff, 0x000000e2), (0x03f0007f, 0x00000007), (0x00000008,),
     "XID_154_EVAL", "Non-fatal", None),
    (145, ("RLW_SRC_TRACK",), (0x03f003ff, 0x000000e2), (0x03f0007f, 0x00000007), (0x00000010,),
     "RESET_GPU", "Fatal", None),
    (145, ("RLW_SRC_TRACK",), (0x03f003ff, 0x000000e2), (0x03f0007f, 0x00000007), (0x00000020,),
     "RESET_GPU", "Fatal", None),
    (145, ("RLW_SRC_TRACK",), (0x03f003ff, 0x000000e2), (0x03f0007f, 0x00000007), (0x80000000,),
     "IGNORE", "Non-fatal", None),
    (145, ("RLW_TAGSTATE",), (0x03f003ff, 0x00000102), (0x03f0007f, 0x00000008), (0x00000001,),
     "IGNORE", "Non-fatal", None),
    (145, ("RLW_TAGSTATE",), (0x03f003ff, 0x00000102), (0x03f0007f, 0x00000008), (0x00000002,),
     "RESET_GPU", "Fatal", None),
    (145, ("RLW_TAGSTATE",), (0x03f003ff, 0x00000102), (0x03f0007f, 0x00000008), (0x00010000,),
     "IGNORE", "Non-fatal", None),
    (145, ("RLW_TAGSTATE",), (0x03f003ff, 0x00000102), (0x03f0007f, 0x00000008), (0x00020000,),
     "RESET_GPU", "Fatal", None),
    (145, ("RLW_TAGSTATE",), (0x03f003ff, 0x00000102), (0x03f0007f, 0x00000008), (0x00100000,),
     "RESET_GPU", "Fatal", None),
    (145, ("RLW_TAGSTATE",), (0x03f003ff, 0x00000102), (0x03f0007f, 0x00000008), (0x80000000,),
     "IGNORE", "Non-fatal", None),
    (146, ("TLW_CTRL",), (0x03f003ff, 0x00000123), (0x03f0007f, 0x00000009), (0x00000001,),
     "IGNORE", "Non-fatal", None),
    (146, ("TLW_CTRL",), (0x03f003ff, 0x00000123), (0x03f0007f, 0x00000009), (0x00000002,),
     "IGNORE", "Non-fatal", None),
    (146, ("TLW_CTRL",), (0x03f003ff, 0x00000123), (0x03f0007f, 0x00000009), (0x00000004,), "RESET_GPU", "Fatal", None),
    (146, ("TLW_CTRL",), (0x03f003ff, 0x00000123), (0x03f0007f, 0x00000009), (0x80000000,),
     "IGNORE", "Non-fatal", None),
    (146, ("TLW_RX", "TLW_RX_PIPE0"), (0x03f003ff, 0x00000143), (0x03f0007f, 0x0000000a), (0x00000001,),
     "IGNORE", "Non-fatal", None),
    (146, ("TLW_RX", "TLW_RX_PIPE0"), (0x03f003ff, 0x00000143), (0x03f0007f, 0x0000000a), (0x00000002,),
     "IGNORE", "Non-fatal", None),
    (146, ("TLW_RX", "TLW_RX_PIPE0"), (0x03f003ff, 0x00000143), (0x03f0007f, 0x0000000a), (0x00000004,),
     "RESET_GPU", "Fatal", None),
    (146, ("TLW_RX", "TLW_RX_PIPE0"), (0x03f003ff, 0x00000143), (0x03f0007f, 0x0000000a), (0x80000000,),
     "IGNORE", "Non-fatal", None),
    (146, ("TLW_RX", "TLW_RX_PIPE1"), (0x03f003ff, 0x00000143), (0x03f0007f, 0x0000000b), (0x00000001,),
     "IGNORE", "Non-fatal", None),
    (146, ("TLW_RX", "TLW_RX_PIPE1"), (0x03f003ff, 0x00000143), (0x03f0007f, 0x0000000b), (0x00000002,),
     "IGNORE", "Non-fatal", None),
    (146, ("TLW_RX", "TLW_RX_PIPE1"), (0x03f003ff, 0x00000143), (0x03f0007f, 0x0000000b), (0x00000004,),
     "RESET_GPU", "Fatal", None),
    (146, ("TLW_RX", "TLW_RX_PIPE1"), (0x03f003ff, 0x00000143), (0x03f0007f, 0x0000000b), (0x80000000,),
     "IGNORE", "Non-fatal", None),
    (146, ("TLW_TX", "TLW_TX_PIPE0"), (0x03f003ff, 0x00000163), (0x03f0007f, 0x0000000c), (0x00000001,),
     "IGNORE", "Non-fatal", None),
    (146, ("TLW_TX", "TLW_TX_PIPE0"), (0x03f003ff, 0x00000163), (0x03f0007f, 0x0000000c), (0x00000002,),
     "IGNORE", "Non-fatal", None),
    (146, ("TLW_TX", "TLW_TX_PIPE0"), (0x03f003ff, 0x00000163), (0x03f0007f, 0x0000000c), (0x00000004,),
     "RESET_GPU", "Fatal", None),
    (146, ("TLW_TX", "TLW_TX_PIPE0"), (0x03f003ff, 0x00000163), (0x03f0007f, 0x0000000c), (0x80000000,),
     "IGNORE", "Non-fatal", None),
    (146, ("TLW_TX", "TLW_TX_PIPE1"), (0x03f003ff, 0x00000163), (0x03f0007f, 0x0000000d), (0x00000001,),
     "IGNORE", "Non-fatal", None),
    (146, ("TLW_TX", "TLW_TX_PIPE1"), (0x03f003ff, 0x00000163), (0x03f0007f, 0x0000000d), (0x00000002,),
     "IGNORE", "Non-fatal", None),
    (146, ("TLW_TX", "TLW_TX_PIPE1"), (0x03f003ff, 0x00000163), (0x03f0007f, 0x0000000d), (0x00000004,),
     "RESET_GPU", "Fatal", None),
    (146, ("TLW_TX", "TLW_TX_PIPE1"), (0x03f003ff, 0x00000163), (0x03f0007f, 0x0000000d), (0x80000000,),
     "IGNORE", "Non-fatal", None),
    (147, ("TREX",), (0x03f003ff, 0x00000184), (0x03f0007f, 0x0000000e), (0x00000001,), "IGNORE", "Non-fatal", None),
    (147, ("TREX",), (0x03f003ff, 0x00000184), (0x03f0007f, 0x0000000e), (0x80000000,), "IGNORE", "Non-fatal", None),
    (148, ("NVLPW_CTRL", "NVLPW"), (0x03f003ff, 0x00000005), (0x03f0007f, 0x0000000f), (0x80000000,),
     "IGNORE", "Non-fatal", None),
    (149, ("NETIR", "NETIR_INT"), (0x03f003ff, 0x00000006), (0x03f0007f, 0x00000018), None,
     "RESET_GPU", "Link Fatal", None),
    (149, ("NETIR_LINK_EVT", "NETIR_LINK_DOWN"), (0x03f003ff, 0x000001c6), (0x03f0007f, 0x00000011), None,
     "RESET_GPU", "Link Fatal", None),
    (149, ("NETIR_LINK_EVT", "NETIR_LINK_DOWN"), (0x03f003ff, 0x001001c6), (0x03f0007f, 0x00100011), None,
     "RESET_GPU", "Link Fatal", None),
    (149, ("NETIR_LINK_EVT", "NETIR_LINK_DOWN"), (0x03f003ff, 0x002001c6), (0x03f0007f, 0x00200011), None,
     "RESET_GPU", "Link Fatal", None),
    (149, ("NETIR_LINK_EVT", "NETIR_LINK_DOWN"), (0x03f003ff, 0x004001c6), (0x03f0007f, 0x00400011), None,
     "RESET_GPU", "Link Fatal", None),
    (149, ("NETIR_LINK_EVT", "NETIR_LINK_DOWN"), (0x03f003ff, 0x00a001c6), (0x03f0007f, 0x00a00011), None,
     "RESET_GPU", "Link Fatal", None),
    (149, ("NETIR_LINK_EVT", "NETIR_LINK_DOWN"), (0x03f003ff, 0x00f001c6), (0x03f0007f, 0x00f00011), None,
     "RESET_GPU", "Link Fatal", None),
    (149, ("NETIR_LINK_EVT", "NETIR_LINK_DOWN"), (0x03f003ff, 0x010001c6), (0x03f0007f, 0x01000011), None,
     "RESET_GPU", "Link Fatal", None),
    (149, ("NETIR_LINK_EVT", "NETIR_LINK_DOWN"), (0x03f003ff, 0x011001c6), (0x03f0007f, 0x01100011), None,
     "RESET_GPU", "Link Fatal", None),
    (149, ("NETIR_LINK_EVT", "NETIR_LINK_DOWN"), (0x03f003ff, 0x012001c6), (0x03f0007f, 0x01200011), None,
     "RESET_GPU", "Link Fatal", None),
    (149, ("NETIR_LINK_EVT", "NETIR_LINK_DOWN"), (0x03f003ff, 0x015001c6), (0x03f0007f, 0x01500011), None,
     "RESET_GPU", "Link Fatal", None),
    (149, ("NETIR_LINK_EVT", "NETIR_LINK_DOWN"), (0x03f003ff, 0x016001c6), (0x03f0007f, 0x01600011), None,
     "RESET_GPU", "Link Fatal", None),
    (149, ("NETIR_LINK_EVT", "NETIR_LINK_DOWN"), (0x03f003ff, 0x020001c6), (0x03f0007f, 0x02000011), None,
     "RESET_GPU", "Link Fatal", None),
    (149, ("NETIR_LINK_EVT", "NETIR_LINK_DOWN"), (0x03f003ff, 0x021001c6), (0x03f0007f, 0x02100011), None,
     "RESET_GPU", "Link Fatal", None),
    (149, ("NETIR_LINK_EVT", "NETIR_LINK_DOWN"), (0x03f003ff, 0x022001c6), (0x03f0007f, 0x02200011), None,
     "RESET_GPU", "Link Fatal", None),
    (149, ("NETIR_LINK_EVT", "NETIR_LINK_DOWN"), (0x03f003ff, 0x023001c6), (0x03f0007f, 0x02300011), None,
     "RESET_GPU", "Link Fatal", None),
    (149, ("NETIR_LINK_EVT", "NETIR_LINK_DOWN"), (0x03f003ff, 0x024001c6), (0x03f0007f, 0x02400011), None,
     "RESET_GPU", "Link Fatal", None),
    (149, ("NETIR_LINK_EVT", "NETIR_LINK_DOWN"), (0x03f003ff, 0x025001c6), (0x03f0007f, 0x02500011), None,
     "RESET_GPU", "Link Fatal", None),
    (149, ("NETIR_LINK_EVT", "NETIR_LINK_DOWN"), (0x03f003ff, 0x026001c6), (0x03f0007f, 0x02600011), None,
     "IGNORE", "Link Fatal", None),
    (149, ("NETIR_LINK_EVT", "NETIR_LINK_DOWN"), (0x03f003ff, 0x028001c6), (0x03f0007f, 0x02800011), None,
     "IGNORE", "Fatal", None),
    (149, ("NETIR_LINK_EVT", "NETIR_LINK_DOWN"), (0x03f003ff, 0x02a001c6), (0x03f0007f, 0x02a00011), None,
     "RESET_GPU", "Link Fatal?", None),
    (149, ("NETIR_LINK_EVT", "NETIR_LINK_DOWN"), (0x03f003ff, 0x02b001c6), (0x03f0007f, 0x02b00011), None,
     "RESET_GPU", "Link Fatal?", None),
    (149, ("NETIR_BER_EVENT",), (0x03f003ff, 0x00000226), (0x03f0007f, 0x00000013), (0x00000000,),
     "IGNORE", "Non-fatal", None),
    (149, ("NETIR_BER_EVENT",), (0x03f003ff, 0x00000226), (0x03f0007f, 0x00000013), (0x00000001,),
     "IGNORE", "Non-fatal", None),
    (149, ("NETIR_BER_EVENT",), (0x03f003ff, 0x00000226), (0x03f0007f, 0x00000013), (0x00000002,),
     "IGNORE", "Non-fatal", None),
    (149, ("NETIR_BER_EVENT",), (0x03f003ff, 0x00000226), (0x03f0007f, 0x00000013), (0x00000003,),
     "IGNORE", "Non-fatal", None),
    (149, ("NETIR_MFDE_EVENT",), (0x03f003ff, 0x00000246), (0x03f0007f, 0x00000014), (0x00000001,),
     "RESET_GPU", "Fatal**", None),
    (149, ("NETIR_MFDE_EVENT",), (0x03f003ff, 0x00000246), (0x03f0007f, 0x00000014), (0x00000003,),
     "IGNORE", "Non-fatal", None),
    (149, ("NETIR_MFDE_EVENT",), (0x03f003ff, 0x00000246), (0x03f0007f, 0x00000014), (0x00000004,),
     "RESET_GPU", "Fatal**", None),
    (149, ("NETIR_MFDE_EVENT",), (0x03f003ff, 0x00000246), (0x03f0007f, 0x00000014), (0x00000005,),
     "RESET_GPU", "Fatal**", None),
    (149, ("NETIR_MFDE_EVENT",), (0x03f003ff, 0x00000246), (0x03f0007f, 0x00000014), (0x00000007,),
     "RESET_GPU", "Fatal**", None),
    (150, ("MSE Degraded",), (0x03f003ff, 0x00000000), (0x03f0007f, 0x00000000), (0x00000000, 0xffffffff),
     "RESET_GPU", "Fatal", None),
    (150, ("MSE_WATCHDOG",), (0x03f003ff, 0x00000000), (0x03f0007f, 0x00000000), (0x00000000,),
     "RESET_GPU", "Fatal", None),
)

# NVML's GPU recovery action (nvmlDeviceGpuRecoveryAction_t): the value an Xid 154 announces ("GPU recovery action
# changed from 0x0 (None) to 0x2 (Node Reboot Required)"), which nvidia-smi -q shows as "GPU Recovery Action".
# value: (NVML's name, bucket, severity of ours, action). Drain P2P and Drain and Reset end in a GPU reset, NVIDIA
# says ("if it is still DRAIN_P2P, reset the GPU"; "after all existing work has drained, reset the GPU"). Another
# value is none NVIDIA documents in a released nvml.h: looked up, never taken for None.
RECOVERY_ACTIONS = {
    0: ("NONE", "IGNORE", "info", "none"),
    1: ("GPU_RESET", "RESET_GPU", "unhealthy", "reset_gpu"),
    2: ("NODE_REBOOT", "RESTART_BM", "unhealthy", "reboot"),
    3: ("DRAIN_P2P", "RESET_GPU", "unhealthy", "reset_gpu"),
    4: ("DRAIN_AND_RESET", "RESET_GPU", "unhealthy", "reset_gpu"),
}
UNKNOWN_RECOVERY_ACTION = ("UNKNOWN", "CONTACT_SUPPORT", "degraded", "look_up_xid")

# DCGM's severities (dcgmErrorSeverity_enum) as a severity of ours and a bucket: ISOLATE "cannot perform workload,
# GPU should be isolated"; RESET "drain and reset GPU"; TRIAGE "should be triaged"; MONITOR "can perform
# workload, but needs to be monitored"; CONFIG "can be configured" (a setting, not the GPU).
DCGM_SEVERITIES = {
    "ISOLATE": ("unhealthy", "CONTACT_SUPPORT"),
    "RESET": ("unhealthy", "RESET_GPU"),
    "TRIAGE": ("degraded", "CONTACT_SUPPORT"),
    "MONITOR": ("degraded", "IGNORE"),
    "CONFIG": ("info", "IGNORE"),
}
# Worst first, for a message that matches several formats.
DCGM_ORDER = ("ISOLATE", "RESET", "TRIAGE", "MONITOR", "CONFIG")

# dcgmi's exit status after a diagnostic (dcgmi returns the dcgmReturn_t, Diag::GetFailureResult): a result DCGM
# rates ISOLATE makes it DCGM_ST_NVVS_ISOLATE_ERROR (-51, 205 to the shell), any other error DCGM_ST_NVVS_ERROR (-30,
# 226). status: (DCGM's name, severity of ours).
DCGM_EXIT_STATUSES = {
    205: ("DCGM_ST_NVVS_ISOLATE_ERROR", "unhealthy"),
    226: ("DCGM_ST_NVVS_ERROR", "degraded"),
}

# DCGM_FR_TARGET_POWER: the targeted power test asks for the board's limit less 1 W and fails below it (NVIDIA's
# diag-targeted-power-plugin page: target_power defaults to TDP - 1 W); missing it by less than this is no fault.
TARGET_POWER_CODE = "DCGM_FR_TARGET_POWER"
TARGET_POWER_MISS_W = 1.0
# DCGM_FR_NVLINK_DOWN on GPUs that have no NVLink: DCGM 2.4 failed PCIe with it on every such system
# (NVIDIA/DCGM issue 49), and DCGM 3.3 and 4.4's health watch still report it (NVIDIA/NVSentinel pull request 1481,
# which suppresses it where NVML says the GPU has no NVLink). No fault where nvidia-smi nvlink -s shows no link.
NVLINK_DOWN_CODE = "DCGM_FR_NVLINK_DOWN"

# DCGM_FR_* codes whose message a diagnostic prints: (name, DCGM 4.6.0's severity, the message's printf formats,
# today's first, then those of earlier releases). The codes rated UNKNOWN (no error) and those printed with no
# message are left out.
DCGM_ERRORS = (
    ("DCGM_FR_PCI_REPLAY_RATE", "ISOLATE", ("Detected more than %u PCIe replays per minute for GPU %u : %d",)),
    ("DCGM_FR_VOLATILE_DBE_DETECTED", "ISOLATE", ("Detected %d volatile double-bit ECC error(s) in GPU %u.",)),
    ("DCGM_FR_VOLATILE_SBE_DETECTED", "MONITOR", (
        "More than %u single-bit ECC error(s) detected in GPU %u Volatile SBEs: %lld",
    )),
    ("DCGM_FR_PENDING_PAGE_RETIREMENTS", "RESET", ("A pending retired page has been detected in GPU %u.",)),
    ("DCGM_FR_RETIRED_PAGES_LIMIT", "ISOLATE", ("%u or more retired pages have been detected in GPU %u.",)),
    ("DCGM_FR_RETIRED_PAGES_DBE_LIMIT", "ISOLATE", (
        "An excess of %u retired pages due to DBEs have been detected and more than one page has been retired due "
        "to DBEs in the past week in GPU %u.",
    )),
    ("DCGM_FR_CORRUPT_INFOROM", "TRIAGE", ("A corrupt InfoROM has been detected in GPU %u.",)),
    ("DCGM_FR_CLOCKS_EVENT_THERMAL", "MONITOR", ("Detected clocks event due to thermal violation in GPU %u.",)),
    ("DCGM_FR_POWER_UNREADABLE", "MONITOR", ("Cannot reliably read the power usage for GPU %u.",)),
    ("DCGM_FR_CLOCKS_EVENT_POWER", "MONITOR", ("Detected clocks event due to power violation in GPU %u.",)),
    ("DCGM_FR_NVLINK_ERROR_THRESHOLD", "ISOLATE", (
        "Detected %ld %s NvLink errors on GPU %u's NVLink which exceeds threshold of %u",
    )),
    ("DCGM_FR_NVLINK_DOWN", "TRIAGE", ("GPU %u's NvLink link %d is currently down",)),
    ("DCGM_FR_NVSWITCH_FATAL_ERROR", "ISOLATE", ("Detected fatal errors on NvSwitch %u link %u",)),
    ("DCGM_FR_NVSWITCH_NON_FATAL_ERROR", "MONITOR", ("Detected nonfatal errors on NvSwitch %u link %u",)),
    ("DCGM_FR_NVSWITCH_DOWN", "MONITOR", ("NvSwitch physical ID %u's NvLink port %d is currently down.",)),
    ("DCGM_FR_NO_ACCESS_TO_FILE", "CONFIG", ("File %s could not be accessed directly: %s",)),
    ("DCGM_FR_NVML_API", "MONITOR", ("Error calling NVML API %s: %s",)),
    ("DCGM_FR_DEVICE_COUNT_MISMATCH", "CONFIG", (
        "The number of devices NVML returns is different than the number of devices in /dev.",
    )),
    ("DCGM_FR_CANNOT_OPEN_LIB", "TRIAGE", ("Cannot open library %s: '%s'",)),
    ("DCGM_FR_DENYLISTED_DRIVER", "CONFIG", ("Found driver on the denylist: %s",)),
    ("DCGM_FR_NVML_LIB_BAD", "ISOLATE", ("Cannot get pointer to %s from libnvidia-ml.so",)),
    ("DCGM_FR_GRAPHICS_PROCESSES", "RESET", (
        "NVVS has detected processes with graphics contexts open running on at least one GPU. This may cause some "
        "tests to fail.",
    )),
    ("DCGM_FR_HOSTENGINE_CONN", "MONITOR", ("Could not connect to the host engine: '%s'",)),
    ("DCGM_FR_FIELD_QUERY", "MONITOR", ("Could not query field %s for GPU %u",)),
    ("DCGM_FR_BAD_CUDA_ENV", "CONFIG", ("Found CUDA performance-limiting environment variable '%s'.",)),
    ("DCGM_FR_PERSISTENCE_MODE", "CONFIG", (
        "Persistence mode for GPU %u is disabled.",
        "Persistence mode for GPU %u is currently disabled. The DCGM diagnostic requires peristence mode to be "
        "enabled.",
    )),
    ("DCGM_FR_LOW_BANDWIDTH", "TRIAGE", (
        "Bandwidth of GPU %u in direction %s of %.2f did not exceed minimum required bandwidth of %.2f.",
    )),
    ("DCGM_FR_HIGH_LATENCY", "TRIAGE", (
        "Latency type %s of GPU %u value %.2f exceeded maximum allowed latency of %.2f.",
    )),
    ("DCGM_FR_CANNOT_GET_FIELD_TAG", "MONITOR", ("Unable to get field information for field id %hu",)),
    ("DCGM_FR_FIELD_VIOLATION", "ISOLATE", ("Detected %ld %s for GPU %u",)),
    ("DCGM_FR_FIELD_THRESHOLD", "MONITOR", ("Detected %ld %s for GPU %u which is above the threshold %ld",)),
    ("DCGM_FR_FIELD_VIOLATION_DBL", "ISOLATE", ("Detected %.1f %s for GPU %u",)),
    ("DCGM_FR_FIELD_THRESHOLD_DBL", "ISOLATE", (
        "Detected %.1f %s for %s:%u which is above the threshold %.1f",
        "Detected %.1f %s for GPU %u which is above the threshold %.1f",
    )),
    ("DCGM_FR_UNSUPPORTED_FIELD_TYPE", "TRIAGE", (
        "Field %s is not supported by this API because it is neither an int64 nor a double type.",
    )),
    ("DCGM_FR_FIELD_THRESHOLD_TS", "ISOLATE", (
        "%s met or exceeded the threshold of %lu per second: %lu at %.1f seconds into the test.",
    )),
    ("DCGM_FR_FIELD_THRESHOLD_TS_DBL", "ISOLATE", (
        "%s met or exceeded the threshold of %.1f per second: %.1f at %.1f seconds into the test.",
    )),
    ("DCGM_FR_THERMAL_VIOLATIONS", "MONITOR", (
        "There were thermal violations totaling %.1f seconds for GPU %u",
        "There were thermal violations totaling %lu seconds for GPU %u",
    )),
    ("DCGM_FR_THERMAL_VIOLATIONS_TS", "MONITOR", (
        "Thermal violations totaling %.1f seconds started at %.1f seconds into the test for GPU %u",
        "Thermal violations totaling %lu samples started at %.1f seconds into the test for GPU %u",
    )),
    ("DCGM_FR_TEMP_VIOLATION", "MONITOR", (
        "Temperature %lld of %s %u exceeded user-specified maximum allowed temperature %lld",
        "Temperature %lld of GPU %u exceeded user-specified maximum allowed temperature %lld",
    )),
    ("DCGM_FR_CLOCKS_EVENT_VIOLATION", "MONITOR", (
        "Clocks event for GPU %u because of clocks event starting %.1f seconds into the test. %s",
    )),
    ("DCGM_FR_INTERNAL", "TRIAGE", ("There was an internal error during the test: '%s'",)),
    ("DCGM_FR_PCIE_GENERATION", "TRIAGE", (
        "GPU %u is running at PCI link generation %d, which is below the minimum allowed link generation of %d "
        "(parameter '%s')",
    )),
    ("DCGM_FR_PCIE_WIDTH", "CONFIG", (
        "GPU %u is running at PCI link width %dX, which is below the minimum allowed link generation of %d "
        "(parameter '%s')",
    )),
    ("DCGM_FR_ABORTED", "CONFIG", ("Test was aborted early due to user signal",)),
    ("DCGM_FR_TEST_DISABLED", "CONFIG", ("The %s test is skipped.", "The %s test is skipped for this GPU.")),
    ("DCGM_FR_CANNOT_GET_STAT", "TRIAGE", ("Unable to generate / collect stat %s for GPU %u",)),
    ("DCGM_FR_STRESS_LEVEL", "TRIAGE", (
        "Max stress level of %.1f did not reach desired stress level of %.1f for GPU %u",
    )),
    ("DCGM_FR_CUDA_API", "MONITOR", ("Error using CUDA API %s",)),
    ("DCGM_FR_FAULTY_MEMORY", "ISOLATE", (
        "Found %lld faulty memory elements on GPU %u",
        "Found %d faulty memory elements on GPU %u",
    )),
    ("DCGM_FR_CANNOT_SET_WATCHES", "MONITOR", ("Unable to add field watches to DCGM: %s",)),
    ("DCGM_FR_CUDA_UNBOUND", "TRIAGE", ("Cuda GPU %d is no longer bound to a CUDA context...Aborting",)),
    ("DCGM_FR_ECC_DISABLED", "CONFIG", ("Skipping test %s because ECC is not enabled on GPU %u",)),
    ("DCGM_FR_MEMORY_ALLOC", "TRIAGE", ("Couldn't allocate at least %.1f%% of GPU memory on GPU %u",)),
    ("DCGM_FR_CUDA_DBE", "ISOLATE", ("CUDA APIs have indicated that a double-bit ECC error has occured on GPU %u.",)),
    ("DCGM_FR_MEMORY_MISMATCH", "ISOLATE", (
        "A memory mismatch was detected on GPU %u, but no error was reported by CUDA or NVML.",
    )),
    ("DCGM_FR_CUDA_DEVICE", "TRIAGE", ("Unable to find a corresponding CUDA device for GPU %u: '%s'",)),
    ("DCGM_FR_ECC_UNSUPPORTED", "CONFIG", ("ECC Memory is not turned on or is unsupported. Skipping test.",)),
    ("DCGM_FR_ECC_PENDING", "MONITOR", ("ECC memory for GPU %u is in a pending state.",)),
    ("DCGM_FR_MEMORY_BANDWIDTH", "TRIAGE", (
        "GPU %u only achieved a memory bandwidth of %.2f GB/s, failing to meet %.2f GB/s for test %d",
    )),
    ("DCGM_FR_TARGET_POWER", "TRIAGE", (
        "Max power of %.1f did not reach desired power minimum %s of %.1f for GPU %u",
    )),
    ("DCGM_FR_API_FAIL", "TRIAGE", ("API call %s failed: '%s'",)),
    ("DCGM_FR_API_FAIL_GPU", "TRIAGE", ("API call %s failed for GPU %u: '%s'",)),
    ("DCGM_FR_CUDA_CONTEXT", "TRIAGE", ("GPU %u failed to create a CUDA context: %s",)),
    ("DCGM_FR_DCGM_API", "TRIAGE", ("Error using DCGM API %s",)),
    ("DCGM_FR_CONCURRENT_GPUS", "CONFIG", (
        "Unable to run concurrent pair bandwidth test without 2 or more gpus. Skipping",
    )),
    ("DCGM_FR_TOO_MANY_ERRORS", "MONITOR", (
        "This API can only return up to four errors per system. Additional errors were found for this system that "
        "couldn't be communicated.",
    )),
    ("DCGM_FR_NVLINK_CRC_ERROR_THRESHOLD", "ISOLATE", (
        "%.1f %s NvLink errors found occuring per second on GPU %u, exceeding the limit of 100 per second.",
    )),
    ("DCGM_FR_NVLINK_ERROR_CRITICAL", "ISOLATE", ("Detected %ld %s NvLink errors on GPU %u's NVLink (should be 0)",)),
    ("DCGM_FR_ENFORCED_POWER_LIMIT", "CONFIG", (
        "Enforced power limit on GPU %u set to %.1f, which is too low to attempt to achieve target power %.1f",
    )),
    ("DCGM_FR_MEMORY_ALLOC_HOST", "TRIAGE", ("Cannot allocate %zu bytes on the host",)),
    ("DCGM_FR_GPU_OP_MODE", "MONITOR", ("Skipping plugin due to a GPU being in GPU Operating Mode: LOW_DP.",)),
    ("DCGM_FR_NO_MEMORY_CLOCKS", "MONITOR", ("No memory clocks <= %u MHZ were found in %u supported memory clocks.",)),
    ("DCGM_FR_NO_GRAPHICS_CLOCKS", "MONITOR", (
        "No graphics clocks <= %u MHZ were found in %u supported graphics clocks for memory clock %u MHZ.",
    )),
    ("DCGM_FR_HAD_TO_RESTORE_STATE", "TRIAGE", ("Had to restore GPU state on NVML GPU(s): %s",)),
    ("DCGM_FR_L1TAG_UNSUPPORTED", "CONFIG", ("This card does not support the L1 cache test. Skipping test.",)),
    ("DCGM_FR_L1TAG_MISCOMPARE", "ISOLATE", ("Detected a miscompare failure in the L1 cache.",)),
    ("DCGM_FR_ROW_REMAP_FAILURE", "RESET", ("GPU %u had uncorrectable memory errors and row remapping failed.",)),
    ("DCGM_FR_UNCONTAINED_ERROR", "ISOLATE", ("GPU had an uncontained error (XID 95)",)),
    ("DCGM_FR_EMPTY_GPU_LIST", "CONFIG", ("No valid GPUs passed to plugin",)),
    ("DCGM_FR_DBE_PENDING_PAGE_RETIREMENTS", "RESET", (
        "Pending page retirements together with a DBE were detected on GPU %u.",
    )),
    ("DCGM_FR_UNCORRECTABLE_ROW_REMAP", "RESET", ("GPU %u had uncorrectable memory errors and %u rows were remapped",)),
    ("DCGM_FR_PENDING_ROW_REMAP", "RESET", (
        "GPU %u had memory errors and row remappings are pending",
        "GPU %u has uncorrectable memory errors and row remappings are pending",
    )),
    ("DCGM_FR_BROKEN_P2P_MEMORY_DEVICE", "ISOLATE", (
        "GPU %u was unsuccessfully written to by GPU %u in a peer-to-peer test: %s",
        "GPU %u was unsuccessfully written to in a peer-to-peer test: %s",
    )),
    ("DCGM_FR_BROKEN_P2P_WRITER_DEVICE", "ISOLATE", (
        "GPU %u unsuccessfully wrote data to GPU %u in a peer-to-peer test: %s",
        "GPU %u unsuccessfully wrote data in a peer-to-peer test: %s",
    )),
    ("DCGM_FR_NVSWITCH_NVLINK_DOWN", "ISOLATE", ("NVSwitch %u's NvLink %u is down.",)),
    ("DCGM_FR_FILE_CREATE_PERMISSIONS", "CONFIG", (
        "The DCGM Diagnostic does not have permissions to create a file in directory '%s'",
    )),
    ("DCGM_FR_PCIE_H_REPLAY_VIOLATION", "ISOLATE", (
        "GPU %u host-side PCIe replay violation, see dmesg for more information",
    )),
    ("DCGM_FR_GPU_EXPECTED_NVLINKS_UP", "TRIAGE", ("Only %u NvLinks are up out of the expected %u",)),
    ("DCGM_FR_NVSWITCH_EXPECTED_NVLINKS_UP", "TRIAGE", (
        "NvSwitch %u - Only %u NvLinks are up out of the expected %u",
    )),
    ("DCGM_FR_XID_ERROR", "TRIAGE", ("Detected XID %u for GPU %u",)),
    ("DCGM_FR_SBE_VIOLATION", "ISOLATE", ("Detected %ld %s for GPU %u",)),
    ("DCGM_FR_DBE_VIOLATION", "ISOLATE", ("Detected %ld %s for GPU %u",)),
    ("DCGM_FR_PCIE_REPLAY_VIOLATION", "ISOLATE", ("Detected %ld %s for GPU %u",)),
    ("DCGM_FR_SBE_THRESHOLD_VIOLATION", "ISOLATE", ("Detected %ld %s for GPU %u which is above the threshold %ld",)),
    ("DCGM_FR_DBE_THRESHOLD_VIOLATION", "ISOLATE", ("Detected %ld %s for GPU %u which is above the threshold %ld",)),
    ("DCGM_FR_PCIE_REPLAY_THRESHOLD_VIOLATION", "ISOLATE", (
        "Detected %ld %s for GPU %u which is above the threshold %ld",
    )),
    ("DCGM_FR_SXID_ERROR", "ISOLATE", ("Detected fatal NvSwitch SXID %u",)),
    ("DCGM_FR_GFLOPS_THRESHOLD_VIOLATION", "TRIAGE", (
        "Detected %.2f %s for GPU %u which is below the threshold %.2f",
    )),
    ("DCGM_FR_NAN_VALUE", "ISOLATE", (
        "Found %lld NaN-value memory elements on GPU %u",
        "Found %d NaN-value memory elements on GPU %u",
    )),
    ("DCGM_FR_FABRIC_MANAGER_TRAINING_ERROR", "CONFIG", (
        "Fabric Manager (Cluster UUID: %s, Clique ID: %ld, Health Mask: %#lx): %s.",
        "Fabric Manager (Cluster UUID: %s, Clique ID: %ld): %s.",
    )),
    ("DCGM_FR_BROKEN_P2P_PCIE_MEMORY_DEVICE", "ISOLATE", (
        "GPU %u was unsuccessfully written to by GPU %u over PCIe in a peer-to-peer test: %s",
    )),
    ("DCGM_FR_BROKEN_P2P_PCIE_WRITER_DEVICE", "ISOLATE", (
        "GPU %u unsuccessfully wrote data to GPU %u over PCIe in a peer-to-peer test: %s",
    )),
    ("DCGM_FR_BROKEN_P2P_NVLINK_MEMORY_DEVICE", "ISOLATE", (
        "GPU %u was unsuccessfully written to by GPU %u over NVLink in a peer-to-peer test: %s",
    )),
    ("DCGM_FR_BROKEN_P2P_NVLINK_WRITER_DEVICE", "ISOLATE", (
        "GPU %u unsuccessfully wrote data to GPU %u over NVLink in a peer-to-peer test: %s",
    )),
    ("DCGM_FR_TEST_SKIPPED", "CONFIG", ("Test %s was skipped.",)),
    ("DCGM_FR_SRAM_THRESHOLD", "ISOLATE", ("SRAM Threshold Count exceeded on GPU %d: %ld",)),
    ("DCGM_FR_NVLINK_EFFECTIVE_BER_THRESHOLD", "ISOLATE", (
        "Detected effective BER %.2e exceeds minimum threshold on GPU %u's NVLink.",
    )),
    ("DCGM_FR_FALLEN_OFF_BUS", "ISOLATE", ("GPU %d has fallen off the bus",)),
    ("DCGM_FR_NVLINK_SYMBOL_BER_THRESHOLD", "ISOLATE", (
        "Detected symbol BER %.2e exceeds minimum threshold on GPU %u's NVLink.",
    )),
    ("DCGM_FR_IMEX_UNHEALTHY", "ISOLATE", ("IMEX %s status is %s (%s)",)),
    ("DCGM_FR_FABRIC_PROBE_STATE", "MONITOR", ("GPU %u: Fabric State is %s (%lld).",)),
    ("DCGM_FR_GPU_RECOVERY_RESET", "RESET", (
        "GPU %u requires a reset to recover from a fault. Recovery action: %ld (GPU_RESET).",
    )),
    ("DCGM_FR_GPU_RECOVERY_REBOOT", "ISOLATE", (
        "GPU %u fault may have left the OS in an inconsistent state. Recovery action: %ld (NODE_REBOOT).",
    )),
    ("DCGM_FR_GPU_RECOVERY_DRAIN_P2P", "RESET", (
        "GPU %u requires peer-to-peer traffic to be quiesced. Recovery action: %ld (DRAIN_P2P).",
    )),
    ("DCGM_FR_GPU_RECOVERY_DRAIN_RESET", "RESET", (
        "GPU %u operating at reduced capacity due to a fault. Recovery action: %ld (DRAIN_AND_RESET).",
    )),
    ("DCGM_FR_NCCL_ERROR", "RESET", ("Detected NCCL error: %s Recovery action: %ld (DRAIN_AND_RESET).",)),
    ("DCGM_FR_CONTAINED_ERROR", "MONITOR", ("GPU had a contained error.",)),
    ("DCGM_FR_UNCORRECTABLE_ROW_REMAP_LIMIT", "TRIAGE", (
        "GPU %u exceeded uncorrectable row remap limit with %u remapped rows",
    )),
)

# The severity of ours and the action of an Xid by its bucket, where nothing more than its number is known (the
# alert rules see only that). Restarting the application or nothing at all leaves the GPU serving: info. A reset,
# a reboot, a case, a look at the mechanicals or the firmware: unhealthy until done. An NVLink5 Xid is decoded from
# its line (NVLINK5_DECODE) where the line is read; by its number alone it may be harmless: degraded. CHECK_UVM
# asks for a reset only where UVM or vGPU is used: degraded. A solo Xid 45 follows a process stopped or killed as
# often as a fabric that needs its manager restarted: info, with NVIDIA's advice.
BUCKET_RATINGS = {
    "RESTART_APP": ("info", "restart_app"),
    "IGNORE": ("info", "none"),
    "WORKFLOW_XID_45": ("info", "restart_fabric_manager"),
    "RESET_GPU": ("unhealthy", "reset_gpu"),
    "RESTART_BM": ("unhealthy", "reboot"),
    "CONTACT_SUPPORT": ("unhealthy", "drain_and_open_case"),
    "WORKFLOW_XID_48": ("unhealthy", "reset_gpu"),
    "WORKFLOW_NVLINK_ERR": ("unhealthy", "check_nvlink"),
    "WORKFLOW_NVLINK5_ERR": ("degraded", "check_nvlink"),
    "CHECK_MECHANICALS": ("unhealthy", "check_pcie_link"),
    "UPDATE_SWFW": ("unhealthy", "update_driver"),
    "RESTART_VM": ("unhealthy", "restart_vm"),
    "CHECK_UVM": ("degraded", "check_uvm"),
}
# An Xid this release of the catalogue gives no bucket (or does not list): looked up, neither healthy nor unhealthy
# on a guess.
UNKNOWN_XID = ("degraded", "look_up_xid", "CONTACT_SUPPORT")

# What a finding of gpu_health that is no Xid carries as its bucket, by its action: the bucket whose remedy is the
# action's. Advice that no bucket of NVIDIA's covers (persistence mode, ACS, the IOMMU, peer-to-peer) is IGNORE:
# nothing a GPU reset or a reboot changes; its severity still says whether the node may serve.
ACTION_BUCKETS = {
    "none": "IGNORE",
    "restart_app": "RESTART_APP",
    "reset_gpu": "RESET_GPU",
    "reboot": "RESTART_BM",
    "drain_and_open_case": "CONTACT_SUPPORT",
    "check_cooling_and_power": "CHECK_MECHANICALS",
    "check_pcie_link": "CHECK_MECHANICALS",
    "check_nvlink": "WORKFLOW_NVLINK_ERR",
    "check_fabric_manager": "RESTART_BM",
    "enable_persistence": "IGNORE",
    "look_up_xid": "CONTACT_SUPPORT",
    "read_dcgm_diag": "CONTACT_SUPPORT",
    "disable_acs_or_iommu_pt": "IGNORE",
    "disable_acs": "IGNORE",
    "iommu_passthrough": "IGNORE",
    "check_p2p": "IGNORE",
    "restart_fabric_manager": "WORKFLOW_XID_45",
    "update_driver": "UPDATE_SWFW",
    "restart_vm": "RESTART_VM",
    "check_uvm": "CHECK_UVM",
}
