"""Test stand-in for nvidia-smi on an 8x H100 HGX (molecule fabric): the recorded table and topo -m of such a host
(tests/data/nvidia_smi/table-h100-8gpu.txt, topo-h100-8gpu-nvlink.txt), the query with the recorded GPUs' names
and memory at the loaded driver's version, and -q's Fabric section: Not Started until Fabric Manager's daemon
runs, then Completed, as NVIDIA's driver reports it."""
import os
import re
import sys

RECORDED = "/usr/local/share/hgx-replay/"
PID_FILE = "/var/run/nvidia-fabricmanager/nv-fabricmanager.pid"
try:
    with open("/proc/driver/nvidia/version") as proc:
        loaded = re.search(r"Kernel Module(?: for \S+)?\s+([0-9.]+)\s", proc.read()).group(1)
except (OSError, AttributeError):
    print("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the "
          "latest NVIDIA driver is installed and running.")
    sys.exit(9)


def fabric_manager_runs():
    try:
        with open(PID_FILE) as pid_file:
            os.kill(int(pid_file.read()), 0)
        return True
    except (OSError, ValueError):
        return False


arguments = sys.argv[1:]
if not arguments:
    sys.stdout.write(open(RECORDED + "table-h100-8gpu.txt").read())
elif arguments == ["topo", "-m"]:
    sys.stdout.write(open(RECORDED + "topo-h100-8gpu-nvlink.txt").read())
elif arguments[0].startswith("--query-gpu="):
    for index in range(8):
        print("%d, NVIDIA H100 80GB HBM3, GPU-00000000-0000-0000-0000-00000000000%d, 9.0, 81559, 5, 5, 16, 16, "
              "Enabled, %s" % (index, index, loaded))
elif arguments == ["-q"]:
    state, status = ("Completed", "Success") if fabric_manager_runs() else ("Not Started", "N/A")
    print("\n==============NVSMI LOG==============\n\nDriver Version                            : %s\n" % loaded)
    for index in range(8):
        print("GPU 00000000:%02X:00.0\n    Product Name                          : NVIDIA H100 80GB HBM3\n"
              "    Fabric\n        State                             : %s\n"
              "        Status                            : %s\n        CliqueId                          : N/A\n"
              "        ClusterUUID                       : N/A" % (0x18 + index, state, status))
else:
    print("Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.")
    sys.exit(2)
