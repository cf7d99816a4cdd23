#!/usr/bin/env bash
# `make ee`: build the execution environment (execution-environment.yml) with ansible-builder from the local
# Debian 12 image, then run the site playbook in it against a fresh demo node the way AWX runs a job: ansible-runner
# on this machine, the playbook in the EE container (process isolation), the job's inventory and environment in
# a private data directory. The ml_stack role installs offline from a wheelhouse that the controller (the EE)
# downloads onto a mounted volume, as an AWX job would. Run twice: the second must change nothing. Prints the time
# of the build and of each run.
set -euo pipefail
cd "$(dirname "$0")/../.."
checkout=$PWD
work=$checkout/.build/ee
node=blackwell-ee-node
image=blackwell-ee:$(sed -n 's/^version: //p' galaxy.yml)

rm -rf "$work" && mkdir -p "$work/runner/inventory/group_vars" "$work/runner/env" "$work/wheelhouse"
ansible-galaxy collection build --force --output-path "$work" >/dev/null
mv "$work"/blackwell-gpu_node-*.tar.gz "$work/blackwell-gpu_node.tar.gz"
# community.docker reaches the demo node, a container; the ansible package of the toolchain carries it.
docker_collection=$(python -c 'import ansible_collections.community.docker as c; print(list(c.__path__)[0])')
tar -C "$(dirname "$docker_collection")" -cf "$work/community-docker.tar" docker
# pip in the build trusts what pip trusts on this machine (a proxy's CA, say).
cp "${PIP_CERT:-/etc/ssl/certs/ca-certificates.crt}" "$work/ca-certificates.crt"

echo "==> Building the execution environment $image from $BLACKWELL_IMAGE_DEBIAN12"
start=$SECONDS
ansible-builder build --container-runtime docker --tag "$image" --file execution-environment.yml \
  --context "$work/context" --build-arg "EE_BASE_IMAGE=$BLACKWELL_IMAGE_DEBIAN12" \
  --build-arg PKGMGR_PRESERVE_CACHE=always --extra-build-cli-args='--network host' --verbosity 2
build_s=$((SECONDS - start))

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
echo "==> EE built in ${build_s} s; site through ansible-runner in the EE: ${first_s} s, then ${second_s} s with 0 changed"
echo "    Job output: $work/runner/artifacts/{first,second}/stdout. Remove the node: docker rm -f $node"
