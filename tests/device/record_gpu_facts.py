"""Run gpu_facts' core on this host, recording every command it runs and what the driver's /proc file says,
so that tests/unit replays the host exactly. Usage: python3 tests/device/record_gpu_facts.py OUTPUT.json
(with the collection importable, as ansible_from_wheels.sh sets it up)."""
import json
import os
import shutil
import subprocess
import sys

from ansible_collections.blackwell.gpu_node.plugins.module_utils._node.nvidia_smi import gather

PROC_VERSION = "/proc/driver/nvidia/version"
NVSWITCH_DRIVER = "/sys/bus/pci/drivers/nvidia-nvswitch"


def main(output):
    commands = []

    def run(argv):
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        commands.append(dict(argv=[os.path.basename(argv[0])] + argv[1:], rc=done.returncode, stdout=done.stdout,
                             stderr=done.stderr))
        return done.returncode, done.stdout, done.stderr

    proc_version = open(PROC_VERSION).read() if os.path.exists(PROC_VERSION) else None
    modinfo = shutil.which("modinfo") or next((path for path in ("/sbin/modinfo", "/usr/sbin/modinfo")
                                               if os.path.exists(path)), None)
    # What the module reads for nvswitch_devices, recorded so that a replay gives the same facts.
    nvswitch_driver = sorted(os.listdir(NVSWITCH_DRIVER)) if os.path.isdir(NVSWITCH_DRIVER) else None
    facts = gather(shutil.which("nvidia-smi"), modinfo, run, proc_version, nvswitch_driver)
    with open(output, "w") as handle:
        json.dump(dict(commands=commands, proc_version=proc_version, modinfo=modinfo is not None,
                       nvswitch_driver=nvswitch_driver, facts=facts), handle, indent=1, sort_keys=True)


if __name__ == "__main__":
    main(sys.argv[1])
