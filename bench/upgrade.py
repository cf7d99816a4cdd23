"""How long one node is out of service when the upgrade playbook switches it, against a reinstall in place.

    make bench-upgrade        (or, with the FIXTURES variables of the Makefile exported: .venv/bin/python bench/upgrade.py)

One Debian 12 container on this machine as the node (the demo inventory's settings), serving on cu128 as in the
upgrade molecule scenario. Then:
- upgrade: `blackwell.gpu_node.upgrade -e stack_profile=cu130`; out of service is the report's time from the stop
  of the old server to the new one answering the generate request (the new stack was built while the old served);
- reinstall in place of the same stack: stop the server, remove the cu130 virtualenv, and run `site` for cu130,
  which builds it again and starts the server; out of service is the whole of it.
"""

import importlib.util
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SPEC = importlib.util.spec_from_file_location("bench_site", HERE / "site.py")
bench_site = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(bench_site)

NODE = "bench-upgrade-0"
BASELINE = ["-e", '{"stack_profile": "cu128", "cuda_register": false, '
            '"stack_profiles_custom": {"cu128": {"python": {"flashinfer_jit_cache": {"version": null}}}}}']


def main():
    if not bench_site.IMAGE or not all(bench_site.FIXTURES):
        sys.exit("Run it through `make bench-upgrade`, which builds the image and the fixtures and names them.")
    bench_site.remove_nodes([NODE])
    bench_site.start_nodes([NODE])
    try:
        with tempfile.TemporaryDirectory() as scratch:
            inventory = bench_site.inventory_for(Path(scratch), [NODE])
            bench_site.playbook(inventory, "molecule/resources/prepare_model.yml")
            bench_site.playbook(inventory, "molecule/resources/prepare_cuda128.yml")
            bench_site.playbook(inventory, "blackwell.gpu_node.site", *BASELINE)
            report = Path(scratch) / "report.json"
            whole = bench_site.playbook(inventory, "blackwell.gpu_node.upgrade", "-e", json.dumps(
                {"stack_profile": "cu130", "gpu_node_upgrade_report": str(report),
                 "stack_profiles_custom": {"cu128": {"python": {"flashinfer_jit_cache": {"version": None}}}}}))[0]
            switched = json.loads(report.read_text())["hosts"][0]
            if switched["outcome"] != "upgraded":
                sys.exit("The upgrade did not succeed: %s" % switched)
            started = time.monotonic()
            bench_site.playbook(inventory, "blackwell.gpu_node.stop")
            subprocess.run(["docker", "exec", NODE, "sh", "-c", 'rm -rf "$(readlink -f /opt/ml-env)"'], check=True)
            bench_site.playbook(inventory, "blackwell.gpu_node.site", "-e", "stack_profile=cu130")
            reinstall = time.monotonic() - started
    finally:
        bench_site.remove_nodes([NODE])
    print("\nOne node out of service, wall seconds (%d cores on this machine; a container as the node)"
          % bench_site.os.cpu_count())
    print("   %-44s %.1f   (the whole upgrade run: %.1f)" % ("upgrade, stop to ready (new stack prepared beside)",
                                                             switched["seconds_to_ready"], whole))
    print("   %-44s %.1f" % ("reinstall in place: stop, rebuild, start", reinstall))


if __name__ == "__main__":
    main()
