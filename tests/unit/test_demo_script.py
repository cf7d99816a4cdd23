"""`make demo` (tests/demo.sh) reuses its node only when the node is this checkout's."""
import os
import subprocess
from pathlib import Path

import pytest

CHECKOUT = Path(__file__).resolve().parents[2]

# Stands in for docker: answers `container inspect` from the node described in $FAKE_NODE_* (no node when
# FAKE_NODE_IMAGE is empty), and logs every other command.
FAKE_DOCKER = r'''#!/usr/bin/env bash
echo "docker $*" >> "$FAKE_LOG"
case "$1 $2" in
  "container inspect")
    [ -n "$FAKE_NODE_IMAGE" ] && [ ! -e "$FAKE_LOG.removed" ] || exit 1
    case "$*" in
      *Config.Image*) echo "$FAKE_NODE_IMAGE" ;;
      *Mounts*) printf '%s\n' $FAKE_NODE_MOUNTS ;;
      *State.Running*) echo true ;;
    esac ;;
  "rm -f") touch "$FAKE_LOG.removed" ;;
  "exec "*) echo "    GET /health -> 200" ;;
esac
'''


@pytest.fixture(name="run_demo")
def fixture_run_demo(tmp_path):
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    (fake_bin / "docker").write_text(FAKE_DOCKER)
    (fake_bin / "ansible-playbook").write_text("#!/bin/sh\nexit 0\n")
    for tool in fake_bin.iterdir():
        tool.chmod(0o755)
    log = tmp_path / "docker.log"

    def run(node_image, node_mounts):
        env = dict(os.environ, PATH="%s:%s" % (fake_bin, os.environ["PATH"]), FAKE_LOG=str(log),
                   FAKE_NODE_IMAGE=node_image, FAKE_NODE_MOUNTS=" ".join(node_mounts),
                   BLACKWELL_IMAGE_DEBIAN12="blackwell-gpu-node/debian12:abc",
                   BLACKWELL_CUDA_REPO="/here/.cache/fixtures/cuda-repo",
                   BLACKWELL_STACK_INDEX="/here/.cache/fixtures/stack-index")
        done = subprocess.run(["bash", str(CHECKOUT / "tests" / "demo.sh")], env=env, capture_output=True,
                              text=True, timeout=60, check=False)
        assert done.returncode == 0, done.stdout + done.stderr
        return [line.split(" ", 2)[1] for line in log.read_text().splitlines()
                if line.split(" ", 2)[1] in ("rm", "run", "start")]
    return run


def test_a_node_made_by_another_checkout_is_recreated(run_demo):
    """Its mounts point at the other checkout's fixtures, which this checkout's inventory does not name."""
    assert run_demo("blackwell-gpu-node/debian12:abc",
                    ["/elsewhere/.cache/fixtures/cuda-repo", "/elsewhere/.cache/fixtures/stack-index"]) == ["rm", "run"]


def test_a_node_of_other_fixtures_is_recreated(run_demo):
    assert run_demo("blackwell-gpu-node/debian12:old",
                    ["/here/.cache/fixtures/stack-index", "/here/.cache/fixtures/cuda-repo"]) == ["rm", "run"]


def test_this_checkouts_node_is_reused(run_demo):
    assert run_demo("blackwell-gpu-node/debian12:abc",
                    ["/here/.cache/fixtures/stack-index", "/here/.cache/fixtures/cuda-repo"]) == []


def test_a_missing_node_is_started(run_demo):
    assert run_demo("", []) == ["run"]
