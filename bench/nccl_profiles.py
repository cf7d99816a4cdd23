"""NCCL profiles side by side on the GPUs of this host: all-reduce bandwidth from 8 KiB to 1 GiB.

Runs on a GPU host with torch (the lent H200 machines: tests/device/record_nccl_profiles.sh):

    python3 bench/nccl_profiles.py --torch-venv /opt/torch/.venv --out OUT [--profiles auto,none,pcie_blackwell]

For each profile, the runtime_env role renders the profile into a virtualenv of its own that sees the
host's torch (a .pth line naming the torch virtualenv's site-packages), exactly as on a node. One process
per GPU then starts from that virtualenv with an empty environment (`env -i`), so every NCCL variable it has
comes from the rendered hook; NCCL's INFO log ("NCCL_X set by environment to Y") proves NCCL took them.
Each rank runs torch.distributed all-reduce over every GPU of the host; rank 0 reports the algorithm
bandwidth (bytes / time) and the bus bandwidth (algbw * 2(n-1)/n, what the links carried, as nccl-tests
reports it). The worker, its launch and the figures are the collection's NCCL smoke
(plugins/module_utils/_stack/nccl_smoke.py), which the validate playbook runs against a floor. `auto` shows
what the role chose on this host and why. NVLink multicast stays off (NCCL_NVLS_ENABLE=0), as the device
machines require.

Writes OUT/nccl_profiles.txt (the table and what NCCL said) and OUT/nccl_profiles.json (every figure, the
host's gpu_facts and the auto choice, which tests/unit replays).
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[1]
# The collection as Ansible finds it (tests/device/ansible_from_wheels.sh), else as `make` links it.
sys.path[:0] = [path for path in os.environ.get("ANSIBLE_COLLECTIONS_PATH", "").split(":") if path] + [
    str(CHECKOUT / ".build" / "collections")]

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.owner import venv_owner_uid  # noqa: E402
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.nccl_smoke import (  # noqa: E402
    DECODE_SIZES,
    GIB,
    KIB,
    figure,
    human,
    launch,
    launch_problem,
    parse_rank_output,
)

SIZES = [8 * KIB * 4 ** power for power in range(9)] + [GIB]  # 8 KiB, 32 KiB ... 512 MiB, 1 GiB
ENV_TAKEN = re.compile(r"NCCL INFO (NCCL_[A-Z0-9_]+) set by environment to (\S+?)\.?$", re.M)
# Set by this script for every profile, not by the rendered hook.
BENCH_VARIABLES = ("NCCL_DEBUG", "NCCL_DEBUG_FILE")
WORKER_TIMEOUT = 900
# The role's debug line, as ansible-core's default callback prints it.
AUTO_SAID = re.compile(r'"msg": "(runtime_env_nccl_profile=auto: .*)"')


def ansible_playbook(playbook, extra_vars, workdir):
    """Runs a playbook on this host with a local connection; returns what it printed (ansible-core alone has no
    json callback)."""
    environ = dict(os.environ, ANSIBLE_NOCOLOR="1")
    path = workdir / "play.yml"
    path.write_text(playbook)
    (workdir / "vars.json").write_text(json.dumps(dict(extra_vars, ansible_python_interpreter=sys.executable)))
    completed = subprocess.run(
        [sys.executable, shutil.which("ansible-playbook"), "-c", "local", "-i", "localhost,", "-e",
         "@%s" % (workdir / "vars.json"), str(path)],
        capture_output=True, text=True, env=environ, timeout=600, check=False)
    if completed.returncode != 0:
        sys.exit("ansible-playbook failed:\n%s\n%s" % (completed.stdout[-6000:], completed.stderr[-3000:]))
    return completed.stdout


def render(profiles, torch_venv, cuda_home, workdir):
    """A virtualenv per profile that sees torch, rendered by the runtime_env role; gpu_facts and auto's choice."""
    purelib = subprocess.run([str(torch_venv / "bin" / "python"), "-c",
                              "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    venvs = {}
    for profile in profiles:
        venv = workdir / ("venv-" + profile)
        subprocess.run([str(torch_venv / "bin" / "python"), "-m", "venv", "--without-pip", str(venv)], check=True)
        own = subprocess.run([str(venv / "bin" / "python"), "-c",
                              "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
        Path(own, "host-torch.pth").write_text(purelib + "\n")
        venvs[profile] = venv
    printed = ansible_playbook("""
- hosts: localhost
  gather_facts: false
  tasks:
    - name: Look at the GPUs
      blackwell.gpu_node.gpu_facts:
    - name: Keep what gpu_facts saw
      ansible.builtin.copy:
        content: "{{ ansible_facts.gpu | to_json }}"
        dest: "{{ bench_gpu_file }}"
        mode: "0644"
    - name: Render each profile
      ansible.builtin.include_role:
        name: blackwell.gpu_node.runtime_env
      vars:
        runtime_env_venv_path: "{{ __bench.value }}"
        runtime_env_nccl_profile: "{{ __bench.key }}"
        runtime_env_cuda_home: "{{ bench_cuda_home }}"
        runtime_env_nccl_overrides: {NCCL_NVLS_ENABLE: 0}
      loop: "{{ bench_venvs | dict2items }}"
      loop_control:
        loop_var: __bench
""", {"bench_cuda_home": cuda_home, "bench_gpu_file": str(workdir / "gpu.json"),
        "bench_venvs": dict((name, str(path)) for name, path in venvs.items())}, workdir)
    gpu = json.loads((workdir / "gpu.json").read_text())
    return venvs, gpu, AUTO_SAID.findall(printed)


def run_profile(venv, gpus, sizes):
    """Every rank from the profile's virtualenv with an empty environment; rank 0's header, figures and NCCL's
    log."""
    # NCCL writes its log to standard output unless told otherwise, in the middle of rank 0's lines.
    nccl_file = venv / "nccl-rank0.log"

    def nccl_log_to(rank):
        return {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_FILE": str(nccl_file) if rank == 0 else os.devnull}

    python = str(venv / "bin" / "python")
    launched = launch(python, gpus, sizes, venv_owner_uid(str(venv)), WORKER_TIMEOUT, rank_environment=nccl_log_to)
    nccl_log = launched["ranks"][0]["stderr"] + (nccl_file.read_text(errors="replace") if nccl_file.exists() else "")
    problem = launch_problem(launched, WORKER_TIMEOUT)
    if problem:
        sys.exit("%s\n%s" % (problem, nccl_log[-6000:]))
    header, timings, _ignored = parse_rank_output(launched["ranks"][0]["stdout"], sizes)
    if header is None or set(timings) != set(sizes):
        sys.exit("rank 0 reported nothing or not every size:\n%s" % nccl_log[-6000:])
    header["environment"] = dict((name, value) for name, value in header["environment"].items()
                                 if name not in BENCH_VARIABLES)
    return header, [figure(size, timings[size][0], gpus) for size in sizes], nccl_log


def table(results, profiles, gpus):
    header = "%-9s" % "size" + "".join("| %-24s" % ("%s algbw/busbw GB/s" % name) for name in profiles)
    if "none" in profiles and "pcie_blackwell" in profiles:
        header += "| pcie_blackwell / none"
    rows = [header, "-" * len(header)]
    for index, size in enumerate(results[profiles[0]]["figures"]):
        size = size["size"]
        row = "%-9s" % human(size)
        for name in profiles:
            figure = results[name]["figures"][index]
            row += "| %10.2f / %-11.2f" % (figure["algbw"], figure["busbw"])
        if "none" in profiles and "pcie_blackwell" in profiles:
            base = results["none"]["figures"][index]["algbw"]
            row += "| %.2fx (algbw)" % (results["pcie_blackwell"]["figures"][index]["algbw"] / base)
        if size in DECODE_SIZES:
            row += "  <- decode all-reduce size"
        rows.append(row)
    if gpus == 1:
        rows.append("One GPU: NCCL has no peer, the all-reduce is a local copy and bus bandwidth is 0 by definition; "
                    "these rows show NCCL's per-call overhead, not the links.")
    return "\n".join(rows)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--torch-venv", type=Path, default=Path("/opt/torch/.venv"))
    parser.add_argument("--cuda-home", default="/usr/local/cuda")
    parser.add_argument("--profiles", default="auto,none,pcie_blackwell")
    args = parser.parse_args()
    if args.out is None:
        parser.error("--out is required")
    args.out.mkdir(parents=True, exist_ok=True)
    profiles = args.profiles.split(",")
    workdir = Path(tempfile.mkdtemp(prefix="nccl-bench-"))
    venvs, gpu, said = render(profiles, args.torch_venv, args.cuda_home, workdir)
    gpus = gpu["count"]
    results = {}
    for name in profiles:
        seen, figures, nccl_log = run_profile(venvs[name], gpus, SIZES)
        taken = dict(ENV_TAKEN.findall(nccl_log))
        results[name] = {"environment": seen["environment"], "nccl_took": taken, "figures": figures,
                         "torch": seen["torch"], "nccl": seen["nccl"],
                         "nccl_info": [line for line in nccl_log.splitlines() if "NCCL INFO" in line][:200]}
    machine = "%d x %s, driver %s, CUDA driver %s, interconnect %s" % (
        gpus, gpu["gpus"][0]["name"] if gpu["gpus"] else "?", gpu["driver_version"], gpu["cuda_driver_version"],
        gpu["interconnect"])
    report = {"machine": machine, "gpu_facts": gpu, "auto_said": said, "sizes": SIZES, "profiles": results}
    (args.out / "nccl_profiles.json").write_text(json.dumps(report, indent=1, sort_keys=True))
    lines = ["machine: " + machine, "torch %s, NCCL %s" % (results[profiles[0]]["torch"], results[profiles[0]]["nccl"])]
    lines += said
    for name in profiles:
        environment = results[name]["environment"]
        taken = results[name]["nccl_took"]
        lines.append("%s: the hook set %s; NCCL logged as set by environment: %s; not mentioned in NCCL's log: %s" % (
            name, " ".join("%s=%s" % item for item in sorted(environment.items())) or "(nothing)",
            " ".join("%s=%s" % item for item in sorted(taken.items())) or "(nothing)",
            " ".join(sorted(set(environment) - set(taken))) or "(none)"))
    lines.append("")
    lines.append(table(results, profiles, gpus))
    text = "\n".join(lines) + "\n"
    (args.out / "nccl_profiles.txt").write_text(text)
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
