#!/usr/bin/env bash
# `make demo`: a Debian 12 container on this machine stands in for a GPU node, and the site
# playbook provisions it end to end (preflight, CUDA, the ML stack, the runtime environment, the
# server) with the demo inventory (inventory/demo, which says what stands in for what). Ends with
# where the server answers and how long each stage took. The node is kept: a second run changes
# nothing and is fast.
set -euo pipefail
cd "$(dirname "$0")/.."

node=blackwell-demo
start=$SECONDS

# A node is this checkout's when it runs this checkout's image and mounts this checkout's fixtures; one made by
# another checkout (or from older fixtures) mounts paths that are not these, and the cuda role would fail on it.
sorted_words() { sed '/^$/d' | sort | tr '\n' ' '; }
if image=$(docker container inspect --format '{{.Config.Image}}' "$node" 2>/dev/null); then
  mounts=$(docker container inspect --format '{{range .Mounts}}{{println .Source}}{{end}}' "$node" | sorted_words)
  wanted=$(printf '%s\n' "$BLACKWELL_CUDA_REPO" "$BLACKWELL_STACK_INDEX" | sorted_words)
  if [ "$image" != "$BLACKWELL_IMAGE_DEBIAN12" ] || [ "$mounts" != "$wanted" ]; then
    echo "==> The demo node $node is not this checkout's (image $image, mounts $mounts); recreating it"
    docker rm -f "$node" >/dev/null
  fi
fi

if [ "$(docker container inspect --format '{{.State.Running}}' "$node" 2>/dev/null)" = true ]; then
  echo "==> Reusing the demo node $node"
elif docker container inspect "$node" >/dev/null 2>&1; then
  echo "==> Starting the demo node $node again"
  docker start "$node" >/dev/null
else
  echo "==> Starting the demo node $node ($BLACKWELL_IMAGE_DEBIAN12)"
  docker run --detach --name "$node" --network host \
    --volume "$BLACKWELL_CUDA_REPO:$BLACKWELL_CUDA_REPO:ro" \
    --volume "$BLACKWELL_STACK_INDEX:$BLACKWELL_STACK_INDEX:ro" \
    "$BLACKWELL_IMAGE_DEBIAN12" sleep infinity >/dev/null
fi

ansible-playbook -i inventory/demo molecule/resources/prepare_model.yml >/dev/null
# profile_roles prints the time each role (each stage) took.
ANSIBLE_CALLBACKS_ENABLED=ansible.posix.profile_roles ansible-playbook -i inventory/demo blackwell.gpu_node.site

echo
echo "==> The server answers on the demo node at http://127.0.0.1:30000:"
docker exec "$node" python3 -c '
import urllib.request
print("    GET /health ->", urllib.request.urlopen("http://127.0.0.1:30000/health").status)'
echo "    Its log: docker exec $node tail /var/log/sglang/sglang.log"
echo "Done in $((SECONDS - start)) s. Check the node: ansible-playbook -i inventory/demo blackwell.gpu_node.validate"
echo "Remove it: docker rm -f $node"
