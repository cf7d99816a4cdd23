"""Both hosts after converge: exactly the cu130 profile behind the stable path, owned by the service user,
with pip check's deliberate lines explained."""
import json
import shlex

testinfra_hosts = ["docker://ml-stack-online", "docker://ml-stack-offline"]

LINK = "/home/sglang/ml-env"
PYTHON = LINK + "/bin/python"
CU130 = {
    "torch": "2.9.1+cu130",
    "sgl-kernel": "0.3.21",
    "flashinfer-python": "0.6.4",
    "flashinfer-cubin": "0.6.4",
    "flashinfer-jit-cache": "0.6.4+cu130",
    "sglang": "0.5.9",
}
SGL_KERNEL_CU130_WHEEL = "sgl_kernel-0.3.21+cu130-cp310-abi3-manylinux2014_x86_64.whl"
# sglang 0.5.9 pins flashinfer 0.6.3; the profile runs 0.6.4.
DELIBERATE = [
    "sglang 0.5.9 has requirement flashinfer_cubin==0.6.3, but you have flashinfer-cubin 0.6.4.",
    "sglang 0.5.9 has requirement flashinfer_python==0.6.3, but you have flashinfer-python 0.6.4.",
]


def run(host, *argv):
    result = host.run(shlex.join(argv))
    assert result.rc == 0, result.stderr
    return result.stdout


def venv_dir(host):
    return host.file(LINK).linked_to


def test_stable_path_links_to_the_cu130_virtualenv_beside_it(host):
    link = host.file(LINK)
    assert link.is_symlink
    assert link.user == "sglang"
    assert host.file(venv_dir(host)).is_directory
    assert venv_dir(host).startswith("/home/sglang/ml-env.cu130-")


def test_every_pinned_package_has_exactly_the_profiles_version(host):
    code = "import importlib.metadata as m, json; print(json.dumps({n: m.version(n) for n in %r}))" % sorted(CU130)
    assert json.loads(run(host, PYTHON, "-c", code)) == CU130


def test_torch_is_the_cuda_13_build(host):
    code = "import json, torch; print(json.dumps([torch.__version__, torch.version.cuda]))"
    assert json.loads(run(host, PYTHON, "-c", code)) == ["2.9.1+cu130", "13.0"]


def test_sgl_kernel_comes_from_the_cu130_wheel_not_from_pypi(host):
    # Both builds say 0.3.21; only the URL pip recorded tells them apart.
    code = ("import importlib.metadata as m, json; "
            "print(json.loads(m.distribution('sgl-kernel').read_text('direct_url.json'))['url'])")
    assert run(host, PYTHON, "-c", code).strip().endswith("/" + SGL_KERNEL_CU130_WHEEL)


ROOTS_FILES = ["pip.conf", "ml-stack-constraints.txt"]


def test_the_virtualenv_belongs_to_the_service_user_but_the_pins_to_root(host):
    # The role changes owners only of a virtualenv someone else built; this one is new: the user built it.
    theirs = run(host, "find", venv_dir(host) + "/", "!", "-user", "sglang", "-printf", "%P %u:%g %m\n")
    assert sorted(theirs.splitlines()) == sorted("%s root:root 644" % name for name in ROOTS_FILES)


def test_the_service_user_has_no_login_shell_and_a_closed_home(host):
    user = host.user("sglang")
    assert user.group == "sglang"
    assert user.home == "/home/sglang"
    # service_user_home: the role keeps it closed whoever made the user, as the virtualenv under it needs.
    home = host.file("/home/sglang")
    assert (home.user, home.group, home.mode) == ("sglang", "sglang", 0o750)
    if host.backend.name == "ml-stack-online":
        # Created by the role.
        assert user.uid < 1000
        assert user.shell == "/usr/sbin/nologin"
    else:
        # Made by hand before, as a login user: the role uses it as it is, its shell untouched.
        assert host.backend.name == "ml-stack-offline"
        assert user.uid >= 1000
        assert user.shell != "/usr/sbin/nologin"


def test_pip_check_reports_only_the_lines_explained_in_the_virtualenv(host):
    checked = host.run(shlex.join([PYTHON, "-m", "pip", "check"]))
    assert checked.rc == 1
    assert sorted(checked.stdout.splitlines()) == DELIBERATE
    explained = host.file(LINK + "/ml-stack-pip-check.txt").content_string.splitlines()
    assert [line for line in explained if not line.startswith("#")] == DELIBERATE


def test_pip_in_the_virtualenv_reads_the_profiles_pins(host):
    assert host.file(LINK + "/pip.conf").contains("^constraint = %s/ml-stack-constraints.txt$" % venv_dir(host))
    pins = [line for line in host.file(LINK + "/ml-stack-constraints.txt").content_string.splitlines()
            if not line.startswith("#")]
    assert pins == ["%s===%s" % (name, version) for name, version in CU130.items()]


def test_the_virtualenv_is_marked_complete_for_cu130(host):
    marker = json.loads(host.file(LINK + "/ml-stack.json").content_string)
    assert marker["profile"] == "cu130"
    assert marker["packages"] == CU130
    assert marker["wheels"] == {"sgl-kernel": SGL_KERNEL_CU130_WHEEL}
