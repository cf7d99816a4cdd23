"""plugins/module_utils/_stack/jit_caches.py: one set of JIT cache directories per stack profile, named by what
decides the compilers, and root keeping them the service user's without following a link."""
import os
import stat

import pytest

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.errors import InvalidOption
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.jit_caches import (
    CACHE_VARIABLES,
    CACHES,
    CacheRefused,
    _created,
    _judged,
    cache_directories,
    cache_environment,
    plain_path_problem,
    profile_directory,
    settle_cache_directories,
)

ROOT = "/var/lib/sglang/.cache/blackwell-gpu-node"
CU130 = {
    "name": "sglang-0.5.17-cu130",
    "description": "CUDA 13.0.1 with torch 2.11.0",
    "cuda": {"version": "13.0.1", "series": "13.0", "home": "/usr/local/cuda-13.0"},
    "python": {"torch": {"version": "2.11.0", "cuda": "13.0"}, "flashinfer_python": {"version": "0.6.15.post1"}},
}


def profile(**changes):
    """CU130 with dotted fields changed: profile(**{"python.torch.version": "2.14.1"})."""
    result = {"name": CU130["name"], "description": CU130["description"], "cuda": dict(CU130["cuda"]),
              "python": {"torch": dict(CU130["python"]["torch"]),
                         "flashinfer_python": dict(CU130["python"]["flashinfer_python"])}}
    for dotted, value in changes.items():
        *parents, last = dotted.split(".")
        target = result
        for key in parents:
            target = target[key]
        target[last] = value
    return result


def directory(**changes):
    problems = []
    name = profile_directory(profile(**changes), problems)
    assert problems == []
    return name


def test_the_same_profile_gets_the_same_directory_every_time():
    assert directory() == directory() == "sglang-0.5.17-cu130-%s" % directory().rsplit("-", 1)[1]
    assert len(directory().rsplit("-", 1)[1]) == 12


@pytest.mark.parametrize("field, value", [
    ("python.torch.version", "2.14.1"),
    ("python.torch.cuda", "12.8"),
    ("cuda.version", "13.0.2"),
])
def test_a_profile_whose_compilers_differ_gets_another_directory_under_the_same_name(field, value):
    # A profile redefined in stack_profiles_custom keeps its name: the digest keeps its caches apart.
    assert directory(**{field: value}) != directory()
    assert directory(**{field: value}).startswith("sglang-0.5.17-cu130-")


@pytest.mark.parametrize("field, value", [
    ("description", "another description"),
    ("cuda.home", "/opt/cuda"),
    ("python.flashinfer_python.version", "0.6.16"),
])
def test_what_does_not_decide_the_compilers_keeps_the_directory(field, value):
    assert directory(**{field: value}) == directory()


def test_two_profiles_get_two_directories():
    assert directory(name="cu128", **{"python.torch.version": "2.9.1", "cuda.version": "12.8.1",
                                      "python.torch.cuda": "12.8"}).startswith("cu128-")
    assert directory(name="other") != directory()


@pytest.mark.parametrize("changes, named", [
    ({"python.torch.version": None}, "python.torch.version"),
    ({"cuda.version": 13}, "cuda.version"),
    ({"name": ""}, "name"),
])
def test_a_profile_without_what_names_the_directory_is_refused_naming_the_field(changes, named):
    problems = []
    assert profile_directory(profile(**changes), problems) is None
    assert problems == ["stack_selected lacks %s, which name the directory of the profile's JIT caches: the stack "
                        "role resolves stack_profile into stack_selected; run it in the play "
                        "(blackwell.gpu_node.stack)" % named]


@pytest.mark.parametrize("name", ["../etc", "a/b", ".hidden", "x" * 101, "with space"])
def test_a_profile_name_that_cannot_be_one_directory_is_refused(name):
    problems = []
    assert profile_directory(profile(name=name), problems) is None
    assert problems[0].startswith("stack_selected.name=%r cannot name a directory" % name)


def test_every_cache_variable_points_into_the_profiles_own_directory():
    problems = []
    variables, cache = cache_environment(ROOT, profile(), problems)
    assert problems == []
    own = "%s/%s/" % (ROOT, directory())
    assert sorted(variables) == list(CACHE_VARIABLES)
    assert dict((name, value[len(own):]) for name, value in variables.items() if value.startswith(own)) == {
        "CUDA_CACHE_PATH": "cuda",
        "CUTE_DSL_CACHE_DIR": "cute-dsl",
        "DG_JIT_CACHE_DIR": "deep_gemm",
        "FLASHINFER_WORKSPACE_BASE": "flashinfer",
        "SGLANG_CACHE_DIR": "sglang",
        "SGLANG_DG_CACHE_DIR": "deep_gemm",
        "TILELANG_CACHE_DIR": "tilelang",
        "TORCHINDUCTOR_CACHE_DIR": "inductor",
        "TORCH_EXTENSIONS_DIR": "torch_extensions",
        "TRITON_CACHE_DIR": "triton/cache",
        "TRITON_HOME": "triton",
        "TVM_FFI_CACHE_DIR": "tvm-ffi",
        "XDG_CACHE_HOME": "xdg",
    }
    assert cache == {"root": ROOT, "directories": [directory()] + ["%s/%s" % (directory(), below)
                                                                   for below in cache_directories()]}


def test_the_directories_are_listed_parents_first_and_cover_every_cache():
    listed = cache_directories()
    assert listed.index("triton") < listed.index("triton/cache")
    assert set(below for below, _names in CACHES) <= set(listed)


def test_no_cache_root_renders_no_variable_and_keeps_no_directory():
    problems = []
    assert cache_environment(None, None, problems) == ({}, {"root": None, "directories": []})
    assert problems == []


@pytest.mark.parametrize("root", [
    "var/cache", "/var/cache/", "/var//cache", "/var/../etc", "/var/./cache", "/", "", "/var/cache with space",
    "/var/$HOME", "/var/a:b", "/var/cache\nimport os", "/var/cache\u2028x", "/var/caché", "/var/\"x", None, 7,
])
def test_a_cache_root_the_rendered_files_cannot_carry_is_refused(root):
    assert plain_path_problem(root, "runtime_env_cache_root").startswith(
        "runtime_env_cache_root=%r is not an absolute path of plain names" % (root,))


def test_a_refused_cache_root_renders_nothing():
    problems = []
    assert cache_environment("relative/cache", profile(), problems) == ({}, {"root": None, "directories": []})
    assert len(problems) == 1


@pytest.mark.parametrize("root", [ROOT, "/srv/caches", "/var/lib/sglang/.cache/a_b+c-1.2"])
def test_a_plain_absolute_cache_root_is_accepted(root):
    assert plain_path_problem(root, "runtime_env_cache_root") is None


@pytest.fixture(name="tree")
def fixture_tree(tmp_path):
    """(root, directories, owner): a cache root below tmp_path, two levels of it missing, kept for this process's
    user, as the role keeps them for the service user."""
    os.chmod(str(tmp_path), 0o755)
    root = str(tmp_path / "home" / ".cache" / "blackwell-gpu-node")
    return root, ["p-0123", "p-0123/triton", "p-0123/triton/cache"], (os.getuid(), os.getgid())


def mode(path):
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_a_look_reports_every_missing_level_and_makes_nothing(tree):
    root, directories, owner = tree
    changes = settle_cache_directories(root, directories, owner)
    home = os.path.dirname(os.path.dirname(root))
    assert changes == [(home, "missing"), (os.path.dirname(root), "missing"), (root, "missing")] + [
        (root + "/" + below, "missing") for below in directories]
    assert not os.path.exists(home)


def test_creating_makes_every_level_the_owners_0700_and_a_second_run_changes_nothing(tree):
    root, directories, owner = tree
    looked = settle_cache_directories(root, directories, owner)
    assert settle_cache_directories(root, directories, owner, create=True) == looked
    for path in [os.path.dirname(os.path.dirname(root)), os.path.dirname(root), root] + [
            root + "/" + below for below in directories]:
        info = os.lstat(path)
        assert stat.S_ISDIR(info.st_mode) and (info.st_uid, info.st_gid, mode(path)) == owner + (0o700,), path
    assert settle_cache_directories(root, directories, owner) == []
    assert settle_cache_directories(root, directories, owner, create=True) == []


def test_a_kept_directory_of_another_mode_is_reported_and_given_0700(tree):
    root, directories, owner = tree
    settle_cache_directories(root, directories, owner, create=True)
    os.chmod(root + "/p-0123/triton", 0o755)
    assert settle_cache_directories(root, directories, owner) == [(root + "/p-0123/triton", "of mode 0755, not 0700")]
    assert mode(root + "/p-0123/triton") == 0o755
    settle_cache_directories(root, directories, owner, create=True)
    assert mode(root + "/p-0123/triton") == 0o700


def test_a_level_above_the_root_keeps_its_mode(tree):
    root, directories, owner = tree
    home = os.path.dirname(os.path.dirname(root))
    os.makedirs(home, 0o750)
    os.chmod(home, 0o750)
    settle_cache_directories(root, directories, owner, create=True)
    assert mode(home) == 0o750 and mode(root) == 0o700


@pytest.mark.parametrize("create", [False, True])
def test_a_link_on_the_way_is_refused_and_never_followed(tree, tmp_path, create):
    root, directories, owner = tree
    settle_cache_directories(root, directories[:1], owner, create=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.symlink(str(elsewhere), root + "/p-0123/triton")
    with pytest.raises(CacheRefused) as refused:
        settle_cache_directories(root, directories, owner, create=create)
    assert str(refused.value) == (
        "runtime_env_cache_root=%s: %s/p-0123/triton is a symbolic link, not a directory: root enters no link in a "
        "tree another user can change. Remove it; the role makes a directory there" % (root, root))
    assert os.listdir(str(elsewhere)) == []


def test_a_link_above_the_root_is_refused_too(tree, tmp_path):
    root, directories, owner = tree
    os.symlink(str(tmp_path), os.path.dirname(os.path.dirname(root)))
    with pytest.raises(CacheRefused, match="home is a symbolic link, not a directory"):
        settle_cache_directories(root, directories, owner, create=True)
    assert sorted(os.listdir(str(tmp_path))) == ["home"]


def test_a_file_where_a_directory_goes_is_refused(tree):
    root, directories, owner = tree
    settle_cache_directories(root, [], owner, create=True)
    with open(root + "/p-0123", "w") as handle:
        handle.write("x")
    with pytest.raises(CacheRefused, match="p-0123 is a file, not a directory"):
        settle_cache_directories(root, directories, owner)


def test_a_kept_directory_of_another_user_is_refused_before_anything_changes(tree):
    root, directories, owner = tree
    settle_cache_directories(root, directories[:1], owner, create=True)
    stranger = (owner[0] + 1, owner[1])
    with pytest.raises(CacheRefused) as refused:
        settle_cache_directories(root, directories, stranger)
    assert "%s belongs to " % os.path.dirname(os.path.dirname(root)) not in str(refused.value)
    assert ("runtime_env_cache_root=%s: %s belongs to " % (root, root)) in str(refused.value)
    assert "give it to that user (chown -R" in str(refused.value)
    assert not os.path.exists(root + "/p-0123/triton")


def test_a_path_with_a_dot_component_is_refused_before_anything_is_entered(tree):
    root, directories, owner = tree
    with pytest.raises(InvalidOption, match="runtime_env_cache_root='.*' is not a relative path of plain names"):
        settle_cache_directories(root, ["p-0123/../../escape"], owner, create=True)
    assert not os.path.exists(os.path.dirname(os.path.dirname(root)))


class Info(object):
    def __init__(self, uid, mode_bits):
        self.st_uid, self.st_mode = uid, stat.S_IFDIR | mode_bits


@pytest.mark.parametrize("info, kept, trusted", [
    (Info(0, 0o755), False, True),                     # /, /var/lib: root's
    (Info(1000, 0o750), False, True),                  # the owner's home
    (Info(0, 0o1777), False, True),                    # /tmp: only an entry's owner can swap it
    (Info(0, 0o775), False, False),                    # root's, but its group can swap what lies below
    (Info(0, 0o757), False, False),                    # root's, but others can
    (Info(1001, 0o755), False, False),                 # a third user's
    (Info(1000, 0o700), True, True),                   # a kept directory of the owner's
    (Info(0, 0o700), True, False),                     # a kept directory of root's
    (Info(1001, 0o700), True, False),                  # a kept directory of a third user's
])
def test_which_levels_root_enters_and_keeps(info, kept, trusted):
    assert (_judged(info, "/x", kept, 1000) is None) == trusted


@pytest.mark.skipif(os.geteuid() != 0, reason="only root gives a directory to another user")
def test_root_gives_each_directory_it_makes_to_the_owner(tree):
    root, directories, _owner = tree
    nobody = (65534, 65534)
    settle_cache_directories(root, directories, nobody, create=True)
    assert (os.lstat(root).st_uid, os.lstat(root).st_gid) == nobody
    assert (os.lstat(root + "/p-0123/triton/cache").st_uid, os.lstat(os.path.dirname(root)).st_uid) == (65534, 65534)


def test_a_directory_that_appears_with_something_in_it_is_not_taken_for_the_one_made(tmp_path):
    (tmp_path / "cache" / "planted").mkdir(parents=True)
    parent = os.open(str(tmp_path), os.O_RDONLY | os.O_DIRECTORY)
    try:
        with pytest.raises(CacheRefused, match="appeared while the role created it, made by someone else"):
            _created(parent, "cache", str(tmp_path / "cache"), (os.getuid(), os.getgid()))
    finally:
        os.close(parent)


def test_the_mode_of_a_directory_made_is_0700_whatever_the_umask(tree):
    root, directories, owner = tree
    previous = os.umask(0o277)
    try:
        settle_cache_directories(root, directories, owner, create=True)
    finally:
        os.umask(previous)
    assert mode(os.path.dirname(os.path.dirname(root))) == 0o700 and mode(root + "/p-0123") == 0o700
