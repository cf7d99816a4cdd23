"""The node_snapshot core: what a snapshot holds and what restoring it does."""

import copy
import json
import os

import pytest
import yaml

from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.snapshot import (
    CUDA_LINK,
    DISABLED_SUFFIX,
    LINKER_CONF,
    PROFILE_SCRIPT,
    describe,
    name_problem,
    observation,
    restore_plan,
    serialized,
    snapshot_problems,
    summary,
)

VENV = "/home/sglang/ml-env"
OLD, NEW = "ml-env.cu128-1a2b3c4d", "ml-env.cu130-5e6f7a8b"
OLD_CONF, NEW_CONF = "/usr/local/cuda-12.8/lib64\n", "/usr/local/cuda-13.0/lib64\n"
OLD_SH, NEW_SH = "export CUDA_HOME=/usr/local/cuda-12.8\n", "export CUDA_HOME=/usr/local/cuda-13.0\n"


def node(target, alternative, conf, script, linker_files, server=None):
    return observation(VENV, target, target.split(".")[1].split("-")[0] if target else None, alternative,
                       "/etc/alternatives/cuda", {LINKER_CONF: conf, PROFILE_SCRIPT: script}, linker_files, server)


BEFORE_FILES = ["000-blackwell-gpu-node-cuda.conf", "987_cuda-12.conf", "libc.conf"]
AFTER_FILES = ["000-blackwell-gpu-node-cuda.conf", "987_cuda-12.conf" + DISABLED_SUFFIX, "987_cuda-13.conf",
               "libc.conf"]


@pytest.fixture
def before():
    return node(OLD, "/usr/local/cuda-12.8", OLD_CONF, OLD_SH, BEFORE_FILES, {"argv": ["python"], "env_digest": "x"})


@pytest.fixture
def after():
    return node(NEW, "/usr/local/cuda-13.0", NEW_CONF, NEW_SH, AFTER_FILES)


def test_an_observation_keeps_only_the_disabled_linker_files(before, after):
    assert before["disabled_linker_files"] == []
    assert after["disabled_linker_files"] == ["987_cuda-12.conf" + DISABLED_SUFFIX]
    assert before["venv"] == {"path": VENV, "target": OLD, "profile": "cu128"}


def test_restoring_after_an_upgrade_puts_every_piece_back_and_refreshes_the_linker(before, after):
    actions, problems = restore_plan(before, after, AFTER_FILES, [OLD])
    assert problems == []
    assert actions == [
        {"action": "link", "path": VENV, "target": OLD},
        {"action": "alternative", "name": "cuda", "value": "/usr/local/cuda-12.8"},
        {"action": "write", "path": LINKER_CONF, "content": OLD_CONF},
        {"action": "write", "path": PROFILE_SCRIPT, "content": OLD_SH},
        {"action": "rename", "from": "/etc/ld.so.conf.d/987_cuda-12.conf" + DISABLED_SUFFIX,
         "to": "/etc/ld.so.conf.d/987_cuda-12.conf"},
        {"action": "ldconfig"},
    ]
    assert describe(actions[0]) == VENV + " -> " + OLD


def test_restoring_a_restored_node_changes_nothing(before):
    actions, problems = restore_plan(before, copy.deepcopy(before), BEFORE_FILES, [OLD])
    assert (actions, problems) == ([], [])


def test_the_server_alone_differing_changes_nothing(before):
    now = copy.deepcopy(before)
    now["server"] = {"argv": ["other"], "env_digest": "y"}
    assert restore_plan(before, now, BEFORE_FILES, [OLD]) == ([], [])


def test_a_file_that_was_not_there_is_removed_and_a_file_disabled_since_is_disabled_again(after):
    recorded = node(NEW, "/usr/local/cuda-13.0", NEW_CONF, None, ["987_cuda-12.conf" + DISABLED_SUFFIX])
    now = node(NEW, "/usr/local/cuda-13.0", NEW_CONF, NEW_SH, ["987_cuda-12.conf"])
    actions, problems = restore_plan(recorded, now, ["987_cuda-12.conf"], [NEW])
    assert problems == []
    assert actions == [
        {"action": "remove", "path": PROFILE_SCRIPT},
        {"action": "rename", "from": "/etc/ld.so.conf.d/987_cuda-12.conf",
         "to": "/etc/ld.so.conf.d/987_cuda-12.conf" + DISABLED_SUFFIX},
        {"action": "ldconfig"},
    ]


def test_only_the_login_script_changed_needs_no_ldconfig(before):
    now = copy.deepcopy(before)
    now["files"][PROFILE_SCRIPT] = NEW_SH
    actions, _problems = restore_plan(before, now, BEFORE_FILES, [OLD])
    assert actions == [{"action": "write", "path": PROFILE_SCRIPT, "content": OLD_SH}]


def test_a_plain_cuda_link_is_put_back_where_no_alternative_manages_it():
    recorded = observation(VENV, OLD, "cu128", None, "/usr/local/cuda-12.8", {}, [], None)
    now = observation(VENV, OLD, "cu128", None, "/usr/local/cuda-13.0", {}, [], None)
    actions, problems = restore_plan(recorded, now, [], [OLD])
    assert problems == []
    assert actions == [{"action": "link", "path": CUDA_LINK, "target": "/usr/local/cuda-12.8"}, {"action": "ldconfig"}]


def test_a_pruned_virtualenv_or_a_file_in_the_way_forbids_the_restore(before, after):
    in_the_way = AFTER_FILES + ["987_cuda-12.conf"]
    _actions, problems = restore_plan(before, after, in_the_way, [])
    assert problems == [
        "the recorded virtualenv /home/sglang/" + OLD + " (" + VENV + " -> " + OLD + ") no longer exists",
        "/etc/ld.so.conf.d/987_cuda-12.conf" + DISABLED_SUFFIX
        + " cannot be enabled again: /etc/ld.so.conf.d/987_cuda-12.conf exists beside it",
    ]


def test_a_snapshot_of_another_path_or_with_foreign_entries_is_refused(before):
    assert snapshot_problems(before, VENV) == []
    assert snapshot_problems(before, "/opt/other") == ["it was recorded for venv_path=%s, not /opt/other" % VENV]
    tampered = copy.deepcopy(before)
    tampered["disabled_linker_files"] = ["../../etc/passwd"]
    tampered["files"]["/etc/shadow"] = "x"
    assert snapshot_problems(tampered, VENV) == [
        "its disabled_linker_files holds '../../etc/passwd', not a file name ending in " + DISABLED_SUFFIX,
        "its files hold /etc/shadow, which is not one of the cuda role's files",
    ]
    assert snapshot_problems({"format": 0}, VENV) == ["it is not a snapshot of format 1: record a new one with "
                                                      "state=recorded"]
    assert snapshot_problems({"format": 1, "venv": []}, VENV)[0] == "its venv is not a dict"


@pytest.mark.parametrize("name", ["pre-upgrade", "a.b_c-1"])
def test_names_that_name_one_file_are_accepted(name):
    assert name_problem(name) is None


@pytest.mark.parametrize("name", ["", "../x", "a/b", "a..b", ".hidden", "x\n", "a" * 65])
def test_names_that_could_leave_the_directory_are_refused(name):
    assert "name=" in name_problem(name)


def test_the_serialized_snapshot_is_stable(before):
    assert serialized(before) == serialized(copy.deepcopy(before))
    assert serialized(before).endswith("}\n")


ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..")


def test_the_files_are_the_cuda_roles_and_the_suffix_is_cuda_linker_entries_default():
    with open(os.path.join(ROOT, "roles", "cuda", "vars", "main.yml")) as handle:
        cuda_vars = yaml.safe_load(handle)
    assert (LINKER_CONF, PROFILE_SCRIPT) == (cuda_vars["__cuda_linker_conf"], cuda_vars["__cuda_profile_script"])
    with open(os.path.join(ROOT, "plugins", "modules", "cuda_linker_entries.py")) as handle:
        assert 'suffix=dict(type="str", default="%s")' % DISABLED_SUFFIX in handle.read()


def test_the_whole_observation():
    assert observation(VENV, OLD, "cu128", None, "/usr/local/cuda-12.8", {LINKER_CONF: None},
                       ["a.conf", "b.conf" + DISABLED_SUFFIX], {"argv": ["python"]}) == {
        "format": 1,
        "venv": {"path": VENV, "target": OLD, "profile": "cu128"},
        "cuda": {"path": "/usr/local/cuda", "alternative": None, "target": "/usr/local/cuda-12.8"},
        "files": {LINKER_CONF: None},
        "disabled_linker_files": ["b.conf" + DISABLED_SUFFIX],
        "server": {"argv": ["python"]},
    }


def test_the_whole_message_of_a_bad_name():
    assert name_problem("a/b") == ("name='a/b' must be 1 to 64 letters, digits, '_', '.' or '-', starting with a "
                                   "letter or digit, without '..'")


def test_disabled_linker_files_of_the_right_shape_pass_and_others_are_named(after):
    assert snapshot_problems(after, VENV) == []
    tampered = copy.deepcopy(after)
    tampered["disabled_linker_files"] = [5, "sub/x.conf" + DISABLED_SUFFIX, "x.conf"]
    assert snapshot_problems(tampered, VENV) == [
        "its disabled_linker_files holds %r, not a file name ending in %s" % (name, DISABLED_SUFFIX)
        for name in tampered["disabled_linker_files"]]


def test_no_cuda_link_recorded_leaves_the_link_of_now_alone():
    recorded = observation(VENV, OLD, "cu128", None, None, {}, [], None)
    now = observation(VENV, OLD, "cu128", None, "/usr/local/cuda-13.0", {}, [], None)
    assert restore_plan(recorded, now, [], [OLD]) == ([], [])


@pytest.mark.parametrize("action,line", [
    ({"action": "alternative", "name": "cuda", "value": "/usr/local/cuda-12.8"},
     "update-alternatives --set cuda /usr/local/cuda-12.8"),
    ({"action": "write", "path": LINKER_CONF, "content": "x"}, LINKER_CONF + " rewritten as recorded"),
    ({"action": "remove", "path": PROFILE_SCRIPT}, PROFILE_SCRIPT + " removed (it was not there when recorded)"),
    ({"action": "rename", "from": "/etc/ld.so.conf.d/a.conf.x", "to": "/etc/ld.so.conf.d/a.conf"},
     "/etc/ld.so.conf.d/a.conf.x renamed back to /etc/ld.so.conf.d/a.conf"),
    ({"action": "ldconfig"}, "ldconfig"),
])
def test_each_action_is_described(action, line):
    assert describe(action) == line


def test_the_serialized_text_and_the_summary_without_the_server():
    state = {"venv": {"target": OLD, "path": VENV}, "format": 1, "server": {"argv": ["python"]}}
    assert serialized(state) == json.dumps(state, indent=2, sort_keys=True) + "\n"
    assert serialized(state).startswith('{\n  "format": 1,\n  "server": {\n    "argv": [\n')
    assert summary(state) == '{\n  "format": 1,\n  "venv": {\n    "path": "%s",\n    "target": "%s"\n  }\n}\n' % (
        VENV, OLD)
