"""runtime_env_state (render true and false) against a virtualenv its owner made hostile: an interpreter whose
sysconfig lies about site-packages, links and FIFOs at the rendered files' names, site-packages swapped for a
link to a directory of root's, the stable link repointed at a virtualenv of root's. Root writes into the
virtualenv's own site-packages or nowhere, never through a link, and the interpreter only ever runs as its owner."""
import json

import pytest

MODULE = "runtime_env_state"
ENV_MODULE = "_blackwell_gpu_node_env.py"
HOOK = "00-blackwell-gpu-node-env.pth"
ENVIRONMENT = {"CUDA_HOME": "/usr/local/cuda-13.0", "NCCL_PROTO": "LL", "SGLANG_DISABLE_CUDNN_CHECK": "1"}
FILES = {
    ENV_MODULE: "# Rendered for the hostile-user suite.\nimport os\n\nENVIRONMENT = %s\nfor _name, _value in "
                "ENVIRONMENT.items():\n    os.environ.setdefault(_name, _value)\n" % json.dumps(ENVIRONMENT),
    HOOK: "import _blackwell_gpu_node_env\n",
}
# A .pth file of the owner's that makes the interpreter say its site-packages is the system's.
REDIRECT = ("import sysconfig; _get = sysconfig.get_path; sysconfig.get_path = lambda name, *args, **kwargs: "
            "'/usr/lib/python3/dist-packages' if name == 'purelib' else _get(name, *args, **kwargs)")
RENDER = [True, False]


def arguments(case, venv_path, render):
    args = dict(venv_path=str(venv_path), script=case.collection.role_file("runtime_env", "files/inspect_venv.py"),
                environment=ENVIRONMENT, files=FILES)
    if case.collection.has_option(MODULE, "render"):
        args["render"] = render
    # Below the harness's bound, so that an interpreter the owner made hang is the module's to stop.
    if case.collection.has_option(MODULE, "timeout"):
        args["timeout"] = 5
    return args


def applicable(case, render):
    """The baseline's runtime_env_state only looked (it had no render): it is render=false's equivalent; the
    role rendered, so render=true has none."""
    if render and not case.collection.has_option(MODULE, "render"):
        case.not_applicable("this runtime_env_state has no render option (the role rendered)")
        pytest.skip("no render option")


def reasons_name(run, needle):
    reasons = " ".join((run.result or {}).get("reasons") or [])
    if needle in reasons or needle in run.msg:
        return []
    return ["neither the reasons nor the message name %r: %s" % (needle, (reasons or run.msg)[:200])]


@pytest.mark.parametrize("render", RENDER, ids=["render", "look"])
def test_control_renders_into_the_owners_site_packages_as_the_owner(hostile, render):
    case = hostile(MODULE, "control (render=%s)" % str(render).lower())
    applicable(case, render)
    venv = case.make_venv()
    run = case.module(MODULE, arguments(case, venv.stable, render))
    problems = case.ran_as_owner(run, required=True)
    if render and (venv.site / ENV_MODULE).stat().st_uid != 0:
        problems.append("%s is not root's" % ENV_MODULE)
    case.check(run, "ok", problems=problems)
    case.finish()


@pytest.mark.parametrize("render", RENDER, ids=["render", "look"])
def test_an_interpreter_whose_sysconfig_names_the_system_dist_packages_is_refused(hostile, render):
    case = hostile(MODULE, "sysconfig-redirect .pth (render=%s)" % str(render).lower())
    applicable(case, render)
    venv = case.make_venv()
    venv.pth("00-aaa-redirect.pth", REDIRECT)
    run = case.module(MODULE, arguments(case, venv.stable, render))
    problems = case.ran_as_owner(run) + reasons_name(run, "/usr/lib/python3/dist-packages")
    case.check(run, "refused" if render else "bounded", needle="runtime_env_venv_path", problems=problems)
    case.finish()


PLANTED = {
    "%s -> /etc/shadow" % ENV_MODULE: (ENV_MODULE, "link", "/etc/shadow"),
    "%s FIFO" % ENV_MODULE: (ENV_MODULE, "fifo", None),
    "%s -> /dev/zero" % HOOK: (HOOK, "link", "/dev/zero"),
    "%s FIFO" % HOOK: (HOOK, "fifo", None),
}


@pytest.mark.parametrize("render", RENDER, ids=["render", "look"])
@pytest.mark.parametrize("name", sorted(PLANTED))
def test_a_link_or_fifo_at_a_rendered_name_is_neither_followed_nor_read(hostile, name, render):
    case = hostile(MODULE, "%s (render=%s)" % (name, str(render).lower()))
    applicable(case, render)
    venv = case.make_venv()
    file_name, kind, target = PLANTED[name]
    case.replace(venv.site / file_name, kind, target)
    run = case.module(MODULE, arguments(case, venv.stable, render))
    problems = case.ran_as_owner(run) + reasons_name(run, file_name)
    case.check(run, "refused" if render else "bounded", needle=file_name, problems=problems)
    case.finish()


@pytest.mark.parametrize("render", RENDER, ids=["render", "look"])
def test_site_packages_swapped_for_a_link_to_a_root_directory_is_refused(hostile, render):
    case = hostile(MODULE, "site-packages -> /usr/lib/python3/dist-packages (render=%s)" % str(render).lower())
    applicable(case, render)
    venv = case.make_venv()
    venv.site.rename(venv.site.with_name("site-packages.moved"))
    case.replace(venv.site, "link", "/usr/lib/python3/dist-packages")
    run = case.module(MODULE, arguments(case, venv.stable, render))
    problems = case.ran_as_owner(run) + reasons_name(run, "site-packages")
    case.check(run, "refused" if render else "bounded", needle="runtime_env_venv_path", problems=problems)
    case.finish()


@pytest.mark.parametrize("render", RENDER, ids=["render", "look"])
def test_the_stable_link_repointed_at_a_virtualenv_of_roots_is_refused(hostile, render):
    case = hostile(MODULE, "stable link -> root's virtualenv (render=%s)" % str(render).lower())
    applicable(case, render)
    venv = case.make_venv()
    roots = case.make_venv("root-venv", link=None, parent=case.dir, owner=False)
    case.replace(venv.stable, "link", roots.path)
    run = case.module(MODULE, arguments(case, venv.stable, render))
    problems = case.ran_as_owner(run) + reasons_name(run, str(roots.path))
    if (roots.site / ENV_MODULE).exists():
        problems.append("root's virtualenv got %s" % ENV_MODULE)
    case.check(run, "refused" if render else "bounded", needle="runtime_env_venv_path", problems=problems)
    case.finish()


def test_the_module_file_swapped_with_a_link_to_etc_shadow_in_a_loop_is_never_written_through(hostile):
    case = hostile(MODULE, "%s <-> link to /etc/shadow swap loop (render=true)" % ENV_MODULE)
    applicable(case, True)
    venv = case.make_venv()
    case.replace(venv.site / ENV_MODULE, "file", "# the owner's\n")
    link = case.replace(venv.site / "shadow.link", "link", "/etc/shadow")
    with case.swapping(venv.site / ENV_MODULE, link):
        for _attempt in range(3):
            run = case.module(MODULE, arguments(case, venv.stable, True))
            case.check(run, "bounded", problems=case.ran_as_owner(run))
    case.finish()
