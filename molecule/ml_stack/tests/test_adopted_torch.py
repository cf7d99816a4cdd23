"""The online host's locked profile on the torch it already has (ml_stack_torch_from: /opt/torch-image, root's):
the virtualenv imports torch from there through the .pth file the role keeps, holds no torch of its own, and its
requirements file leaves torch out; the verification (the imports, torch.version.cuda, pip check) passed there."""
import json
import shlex

testinfra_hosts = ["docker://ml-stack-online"]

LINK = "/home/sglang/ml-env-adopted"
PYTHON = LINK + "/bin/python"
TREE = "/opt/torch-image"
TREE_SITE = TREE + "/lib/python3.11/site-packages"
PTH = LINK + "/lib/python3.11/site-packages/blackwell-gpu-node-adopted-torch.pth"


def run(host, *argv):
    result = host.run(shlex.join(argv))
    assert result.rc == 0, result.stderr
    return result.stdout


def test_torch_comes_from_the_adopted_tree_built_for_cuda_13(host):
    code = "import json, torch; print(json.dumps([torch.__file__, torch.__version__, torch.version.cuda]))"
    assert json.loads(run(host, PYTHON, "-c", code)) == [TREE_SITE + "/torch/__init__.py", "2.11.0+cu130", "13.0"]
    assert run(host, PYTHON, "-m", "pip", "check").strip() == "No broken requirements found."


def test_the_virtualenv_holds_no_torch_of_its_own_and_its_requirements_leave_torch_out(host):
    own = run(host, PYTHON, "-c", "import json, site; print(json.dumps(site.getsitepackages()))")
    for directory in json.loads(own):
        listing = host.run(shlex.join(["ls", "-1", directory])).stdout.split()
        assert [name for name in listing if name.startswith("torch")] == [], directory
    requirements = host.file(LINK + "/ml-stack-requirements.txt").content_string
    names = [line.split("==")[0].split(" @ ")[0] for line in requirements.splitlines() if not line.startswith("#")]
    assert sorted(names) == ["flashinfer-python", "sglang", "sglang-kernel"]


def test_the_pth_file_is_roots_and_names_the_adopted_site_packages(host):
    pth = host.file(PTH)
    assert (pth.user, pth.group, pth.mode, pth.content_string) == ("root", "root", 0o644, TREE_SITE + "\n")


def test_the_virtualenv_is_named_after_the_adopted_tree_and_marked_with_it(host):
    assert host.file(LINK).linked_to.startswith("/home/sglang/ml-env-adopted.sglang-0.5.17-cu130-")
    assert host.file(LINK).linked_to != host.file("/home/sglang/ml-env-locked").linked_to.replace("-locked", "-adopted")
    marker = json.loads(host.file(LINK + "/ml-stack.json").content_string)
    assert marker["adopted"] == {"site_packages": TREE_SITE, "torch": "2.11.0"}


def test_the_adopted_tree_is_left_as_it_was(host):
    assert host.file(TREE).user == "root" and host.file(TREE_SITE + "/torch").user == "root"
    code = "import importlib.metadata as m; print(m.version('torch'))"
    assert run(host, TREE + "/bin/python", "-c", code).strip() == "2.11.0"
