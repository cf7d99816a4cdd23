#!/usr/bin/env bash
# `make ee`: build the execution environment of the root execution-environment.yml with ansible-builder, as a user
# builds it from a fresh clone, FROM a local image that stands in for Automation Platform 2.5's minimal EE base
# (tests/ee/base.Dockerfile: ansible-core 2.16 and ansible-runner), then run the site playbook in it against a fresh
# demo node the way AWX runs a job: ansible-runner on this machine, the playbook in the EE container (process
# isolation), the job's inventory and environment in a private data directory. The ml_stack role installs offline
# from a wheelhouse that the controller (the EE) downloads onto a mounted volume, as an AWX job would. Run twice:
# the second must change nothing. Prints the time of each build and of each run.
set -euo pipefail
cd "$(dirname "$0")/../.."
checkout=$PWD
work=$checkout/.build/ee
node=blackwell-ee-node
image=blackwell-ee:$(sed -n 's/^version: //p' galaxy.yml)
ansible_core=$(sed -n 's/^ansible-core==//p' requirements/core-2.16.txt)
ansible_runner=$(sed -n 's/^ansible-runner==//p' requirements/tools.txt)

rm -rf "$work" && mkdir -p "$work/base" "$work/runner/inventory/group_vars" "$work/runner/env" "$work/wheelhouse"
# community.docker reaches the demo node, a container; the ansible package of the toolchain carries it.
docker_collection=$(python -c 'import ansible_collections.community.docker as c; print(list(c.__path__)[0])')
tar -C "$(dirname "$docker_collection")" -cf "$work/base/community-docker.tar" docker
# pip in the builds trusts what pip trusts on this machine (a proxy's CA, say).
cp "${PIP_CERT:-/etc/ssl/certs/ca-certificates.crt}" "$work/base/ca-certificates.crt"
cp tests/ee/microdnf "$work/base/microdnf"
base=blackwell-ee-base:$ansible_core

echo "==> Building $base, the EE base, from $BLACKWELL_IMAGE_DEBIAN12"
start=$SECONDS
docker build --network host --build-arg "BASE=$BLACKWELL_IMAGE_DEBIAN12" --build-arg "ANSIBLE_CORE=$ansible_core" \
  --build-arg "ANSIBLE_RUNNER=$ansible_runner" --tag "$base" --file tests/ee/base.Dockerfile "$work/base"
base_s=$((SECONDS - start))

echo "==> Building the execution environment $image: ansible-builder build -f execution-environment.yml"
start=$SECONDS
ansible-builder build --container-runtime docker --tag "$image" --file execution-environment.yml \
  --context "$work/context" --build-arg "EE_BASE_IMAGE=$base" --extra-build-cli-args='--network host' --verbosity 2
build_s=$((SECONDS - start))
docker run --rm "$image" ansible --version | head -1
docker run --rm "$image" ansible-galaxy collection list blackwell.gpu_node

echo "==> A fresh node $node"
docker rm -f "$node" >/dev/null 2>&1 || true
docker run --detach --name "$node" --network host \
  --volume "$BLACKWELL_CUDA_REPO:$BLACKWELL_CUDA_REPO:ro" --volume "$BLACKWELL_STACK_INDEX:$BLACKWELL_STACK_INDEX:ro" \
  "$BLACKWELL_IMAGE_DEBIAN12" sleep infinity >/dev/null

# The job's inventory: the demo's settings, this node (reached with the docker CLI, mounted into the EE with the
# engine's socket), and the offline wheelhouse on the volume mounted at /wheelhouse. The server listens on 30001, as
# the demo node's has 30000 on the same host network.
cp inventory/demo/group_vars/gpu_nodes.yml "$work/runner/inventory/group_vars/gpu_nodes.yml"
cat > "$work/runner/inventory/hosts.yml" <<YAML
---
all:
  children:
    gpu_nodes:
      hosts:
        $node:
          ansible_connection: community.docker.docker
          gpu_node_become: false
          ml_stack_offline: true
          ml_stack_wheelhouse_controller_path: /wheelhouse
          # Host networking: the demo node's server has 30000.
          sglang_server_port: 30001
YAML
cat > "$work/runner/env/envvars" <<YAML
---
BLACKWELL_CUDA_REPO: $BLACKWELL_CUDA_REPO
BLACKWELL_STACK_INDEX: $BLACKWELL_STACK_INDEX
ANSIBLE_NOCOLOR: "1"
YAML
ansible-playbook -i "$work/runner/inventory" molecule/resources/prepare_model.yml >/dev/null

run_site() {
  ansible-runner run "$work/runner" --playbook blackwell.gpu_node.site --ident "$1" \
    --process-isolation --process-isolation-executable docker --container-image "$image" \
    --container-volume-mount "$BLACKWELL_CUDA_REPO:$BLACKWELL_CUDA_REPO:ro" \
    --container-volume-mount "$BLACKWELL_STACK_INDEX:$BLACKWELL_STACK_INDEX:ro" \
    --container-volume-mount "$work/wheelhouse:/wheelhouse:rw" \
    --container-volume-mount /var/run/docker.sock:/var/run/docker.sock \
    --container-volume-mount "$(command -v docker):/usr/local/bin/docker:ro" \
    --container-option=--network=host
}
# The play's recap line of the node, colour codes taken out.
recap() { sed 's/\x1b\[[0-9;]*m//g' "$work/runner/artifacts/$1/stdout" | grep -a -E "^$node +:"; }

start=$SECONDS
run_site first >/dev/null
first_s=$((SECONDS - start))
recap first
start=$SECONDS
run_site second >/dev/null
second_s=$((SECONDS - start))
recap second
recap second | grep -q 'changed=0 ' || { echo "the second run changed something" >&2; exit 1; }
echo "==> EE base built in ${base_s} s, the EE in ${build_s} s; site through ansible-runner in the EE: ${first_s} s, then ${second_s} s with 0 changed"
echo "    Job output: $work/runner/artifacts/{first,second}/stdout. Remove the node: docker rm -f $node"
