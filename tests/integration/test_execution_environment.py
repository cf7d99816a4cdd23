"""The root execution-environment.yml, as a user runs `ansible-builder build -f execution-environment.yml` in a fresh
clone: ansible-builder makes its build context from the files git has, nothing made first, and the collection it
installs from them is the one the tarball ships. `make ee` builds it and runs site in it."""
import fnmatch
import subprocess
import sys
from pathlib import Path

import yaml
from process_tree import run_bounded

CHECKOUT = Path(__file__).resolve().parents[2]
AAP_MINIMAL_EE = "registry.redhat.io/ansible-automation-platform-25/ee-minimal-rhel9:latest"


def fresh_clone(destination):
    """The files git has (committed or not, less what it ignores) copied to destination, as a clone has them."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=CHECKOUT,
                            check=True, capture_output=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source, target = CHECKOUT / name, destination / name
        if source.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(source.read_bytes())
            target.chmod(source.stat().st_mode)
    return destination


def test_ansible_builder_makes_the_context_from_a_fresh_clone_with_the_collection_and_aap_base(tmp_path):
    clone = fresh_clone(tmp_path / "clone")
    completed = run_bounded([str(Path(sys.executable).with_name("ansible-builder")), "create", "--file",
                             "execution-environment.yml", "--context", "context", "--output-filename", "Containerfile"],
                            timeout=120, cwd=str(clone))
    assert completed.returncode == 0, completed.stdout + completed.stderr
    build = clone / "context" / "_build"
    assert yaml.safe_load((build / "requirements.yml").read_text()) == {
        "collections": [{"name": "/build/collection", "type": "dir"}]}
    collection = build / "collection"
    galaxy = yaml.safe_load((collection / "galaxy.yml").read_text())
    assert (galaxy["namespace"], galaxy["name"]) == ("blackwell", "gpu_node")
    for shipped in ("meta/runtime.yml", "meta/execution-environment.yml", "plugins/modules/sglang_server.py",
                    "roles/ml_stack/tasks/main.yml", "playbooks/site.yml"):
        assert (collection / shipped).is_file(), shipped
    containerfile = (clone / "context" / "Containerfile").read_text()
    assert 'ARG EE_BASE_IMAGE="%s"' % AAP_MINIMAL_EE in containerfile
    assert "COPY _build/collection/ /build/collection/" in containerfile


def test_the_execution_environment_carries_every_file_the_tarball_ships():
    """galaxy.yml's build_ignore decides what the tarball ships; the EE copies at least those files, so that the
    collection ansible-galaxy builds and installs from them (build_ignore applying again) lacks nothing."""
    ignored = yaml.safe_load((CHECKOUT / "galaxy.yml").read_text())["build_ignore"]
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=CHECKOUT,
                            check=True, capture_output=True, text=True).stdout.split()

    def shipped(name):
        parts = name.split("/")
        paths = ["/".join(parts[:end]) for end in range(1, len(parts) + 1)]
        return not any(fnmatch.fnmatch(path, pattern) for path in paths for pattern in ignored)

    definition = yaml.safe_load((CHECKOUT / "execution-environment.yml").read_text())
    copied = dict((entry["src"], entry["dest"]) for entry in definition["additional_build_files"])
    lacking = [name for name in listed if shipped(name)
               and not any(name == src or name.startswith(src + "/") for src in copied)]
    assert lacking == []
    # A folder's contents go into dest itself, a file into dest: each lands at its own path in the collection.
    assert all(dest == "collection/" + src if (CHECKOUT / src).is_dir() else
               dest == "/".join(["collection"] + src.split("/")[:-1]) for src, dest in copied.items())
