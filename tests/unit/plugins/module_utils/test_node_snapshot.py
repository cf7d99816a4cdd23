"""The node_snapshot core: what a snapshot holds, which snapshots are restored, and what restoring one does."""

import copy
import errno
import hashlib
import json
import os

import jinja2
import pytest
import yaml
from ansible.plugins.filter.core import FilterModule

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.errors import InvalidOption
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.secrets import MASK
from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.snapshot import (
    ALTERNATIVE_LINK,
    CUDA_LINK,
    DISABLED_SUFFIX,
    LINKER_CONF,
    PROFILE_SCRIPT,
    RestoreStopped,
    StepFailed,
    carry_out,
    decoded_json,
    describe,
    facts,
    file_text,
    in_progress_snapshot,
    is_cuda_home,
    in_progress_text,
    marker_profile,
    name_problem,
    observation,
    parsed_snapshot,
    restore_plan,
    serialized,
    server_record,
    server_secrets,
    snapshot_problems,
    summary,
    text_problems,
    venv_only,
)

VENV = "/home/sglang/ml-env"
OLD, NEW = "ml-env.cu128-1a2b3c4d", "ml-env.cu130-5e6f7a8b"
CUDA_OLD, CUDA_NEW = "/usr/local/cuda-12.8", "/usr/local/cuda-13.0"
OLD_CONF, NEW_CONF = CUDA_OLD + "/lib64\n", CUDA_NEW + "/lib64\n"
OLD_SH, NEW_SH = "export CUDA_HOME=/usr/local/cuda-12.8\n", "export CUDA_HOME=/usr/local/cuda-13.0\n"
SNAPSHOT_FILE = "/var/lib/blackwell-gpu-node/snapshots/pre-upgrade.json"
ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..")


def node(target, alternative, conf, script, linker_files, server=None):
    return observation(VENV, target, target.split(".")[1].split("-")[0] if target else None, alternative,
                       ALTERNATIVE_LINK, {LINKER_CONF: conf, PROFILE_SCRIPT: script}, linker_files, server)


def plain(cuda_target, files=None):
    """A node without a cuda alternative: /usr/local/cuda is a plain link."""
    return observation(VENV, OLD, "cu128", None, cuda_target, files or {LINKER_CONF: None, PROFILE_SCRIPT: None},
                       [], None)


def host(**known):
    """What the module would find on a host where everything the snapshot names is still there."""
    defaults = dict(venv_path="symbolic link", venv_target_directory=True, cuda_link="symbolic link",
                    cuda_directories=[CUDA_OLD, CUDA_NEW], alternatives=[CUDA_OLD, CUDA_NEW])
    defaults.update(known)
    return facts(**defaults)


BEFORE_FILES = ["000-blackwell-gpu-node-cuda.conf", "987_cuda-12.conf", "libc.conf"]
AFTER_FILES = ["000-blackwell-gpu-node-cuda.conf", "987_cuda-12.conf" + DISABLED_SUFFIX, "987_cuda-13.conf",
               "libc.conf"]


@pytest.fixture
def before():
    return node(OLD, CUDA_OLD, OLD_CONF, OLD_SH, BEFORE_FILES, {"argv": ["python"], "env_digest": "x"})


@pytest.fixture
def after():
    return node(NEW, CUDA_NEW, NEW_CONF, NEW_SH, AFTER_FILES)


def test_an_observation_keeps_only_the_disabled_linker_files(before, after):
    assert before["disabled_linker_files"] == []
    assert after["disabled_linker_files"] == ["987_cuda-12.conf" + DISABLED_SUFFIX]
    assert before["venv"] == {"path": VENV, "target": OLD, "profile": "cu128"}


FULL_RESTORE = [
    {"action": "link", "path": VENV, "target": OLD},
    {"action": "alternative", "name": "cuda", "value": CUDA_OLD},
    {"action": "write", "path": LINKER_CONF, "content": OLD_CONF},
    {"action": "write", "path": PROFILE_SCRIPT, "content": OLD_SH},
    {"action": "rename", "from": "/etc/ld.so.conf.d/987_cuda-12.conf" + DISABLED_SUFFIX,
     "to": "/etc/ld.so.conf.d/987_cuda-12.conf"},
    {"action": "ldconfig"},
]


def test_restoring_after_an_upgrade_puts_every_piece_back_and_refreshes_the_linker(before, after):
    actions, problems = restore_plan(before, after, AFTER_FILES, host())
    assert problems == []
    assert actions == FULL_RESTORE
    assert describe(actions[0]) == VENV + " -> " + OLD


def test_restoring_a_restored_node_changes_nothing(before):
    actions, problems = restore_plan(before, copy.deepcopy(before), BEFORE_FILES, host())
    assert (actions, problems) == ([], [])


def test_the_server_alone_differing_changes_nothing(before):
    now = copy.deepcopy(before)
    now["server"] = {"argv": ["other"], "env_digest": "y"}
    assert restore_plan(before, now, BEFORE_FILES, host()) == ([], [])


def test_a_file_that_was_not_there_is_removed_and_a_file_disabled_since_is_disabled_again():
    recorded = node(NEW, CUDA_NEW, NEW_CONF, None, ["987_cuda-12.conf" + DISABLED_SUFFIX])
    now = node(NEW, CUDA_NEW, NEW_CONF, NEW_SH, ["987_cuda-12.conf"])
    actions, problems = restore_plan(recorded, now, ["987_cuda-12.conf"], host())
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
    actions, _problems = restore_plan(before, now, BEFORE_FILES, host())
    assert actions == [{"action": "write", "path": PROFILE_SCRIPT, "content": OLD_SH}]


def test_an_earlier_restore_that_stopped_part_way_is_finished_with_ldconfig(before):
    """A retry finds the links and files as recorded (the first run did them) but not the linker's cache."""
    actions, problems = restore_plan(before, copy.deepcopy(before), BEFORE_FILES, host(unfinished="pre-upgrade"))
    assert (actions, problems) == ([{"action": "ldconfig"}], [])
    now = copy.deepcopy(before)
    now["files"][PROFILE_SCRIPT] = NEW_SH
    actions, _problems = restore_plan(before, now, BEFORE_FILES, host(unfinished=""))
    assert actions[-1] == {"action": "ldconfig"}


def test_a_plain_cuda_link_is_put_back_where_no_alternative_manages_it():
    actions, problems = restore_plan(plain(CUDA_OLD), plain(CUDA_NEW), [], host(alternatives=None))
    assert problems == []
    assert actions == [{"action": "link", "path": CUDA_LINK, "target": CUDA_OLD}, {"action": "ldconfig"}]


def test_no_cuda_link_recorded_leaves_the_link_of_now_alone():
    assert restore_plan(plain(None), plain(CUDA_NEW), [], host()) == ([], [])


def test_every_problem_on_the_host_is_found_before_anything_changes(before, after):
    in_the_way = AFTER_FILES + ["987_cuda-12.conf"]
    _actions, problems = restore_plan(before, after, in_the_way, host(
        venv_target_directory=False, cuda_directories=[], alternatives=[CUDA_NEW]))
    assert problems == [
        "the recorded virtualenv /home/sglang/" + OLD + " (" + VENV + " -> " + OLD + ") is no longer a directory "
        "beside the link",
        "the cuda alternative no longer offers /usr/local/cuda-12.8 (update-alternatives --list cuda: "
        "/usr/local/cuda-13.0)",
        "the recorded CUDA installation /usr/local/cuda-12.8 is not a directory",
        "/etc/ld.so.conf.d/987_cuda-12.conf" + DISABLED_SUFFIX
        + " cannot be enabled again: /etc/ld.so.conf.d/987_cuda-12.conf exists beside it",
    ]


def test_an_alternative_that_is_gone_altogether_is_named(before, after):
    _actions, problems = restore_plan(before, after, AFTER_FILES, host(alternatives=None))
    assert problems == ["the cuda alternative recorded as /usr/local/cuda-12.8 is no longer registered "
                        "(update-alternatives --list cuda lists nothing)"]


def test_something_other_than_a_link_where_a_link_goes_is_refused(before, after):
    _actions, problems = restore_plan(before, after, AFTER_FILES, host(venv_path="directory"))
    assert problems == [VENV + " is a directory, not a link: nothing can point it elsewhere; move it away"]
    _actions, problems = restore_plan(plain(CUDA_OLD), plain(CUDA_NEW), [], host(cuda_link="directory",
                                                                                 cuda_directories=[]))
    assert problems == ["/usr/local/cuda is a directory, not a link: nothing can point it elsewhere; move it away",
                        "the recorded CUDA installation /usr/local/cuda-12.8 (/usr/local/cuda -> "
                        "/usr/local/cuda-12.8) is not a directory"]


def test_what_need_not_change_is_not_checked(before):
    """The host checks guard the changes: a restore that keeps the link needs no recorded virtualenv to exist."""
    now = copy.deepcopy(before)
    now["files"][PROFILE_SCRIPT] = NEW_SH
    assert restore_plan(before, now, BEFORE_FILES, host(venv_target_directory=False, alternatives=None,
                                                        cuda_directories=[]))[1] == []


def test_a_snapshot_of_another_path_or_with_foreign_entries_is_refused(before):
    assert snapshot_problems(before, VENV) == []
    assert snapshot_problems(before, "/opt/other") == [
        "venv.path is '%s': it was recorded for another virtualenv than venv_path=/opt/other" % VENV,
        "venv.target is '%s', not the name of a profile's virtualenv beside /opt/other (other.<profile>-<8 hex "
        "digits>) (or null)" % OLD]
    tampered = copy.deepcopy(before)
    tampered["disabled_linker_files"] = ["../../etc/passwd"]
    tampered["files"]["/etc/shadow"] = "x"
    assert snapshot_problems(tampered, VENV) == [
        "files holds '/etc/shadow', which no snapshot records",
        "disabled_linker_files[0] is '../../etc/passwd', not a file name in /etc/ld.so.conf.d ending in "
        + DISABLED_SUFFIX,
    ]


def valid():
    return node(OLD, CUDA_OLD, OLD_CONF, OLD_SH, BEFORE_FILES, {"argv": ["python", "--api-key", MASK],
                                                                "env_digest": "x"})


def edited(change):
    snapshot = valid()
    change(snapshot)
    return json.dumps(snapshot).encode()


def setting(*keys_and_value):
    *keys, key, value = keys_and_value

    def change(snapshot):
        for name in keys:
            snapshot = snapshot[name]
        snapshot[key] = value
    return change


def dropping(part, key):
    return lambda snapshot: snapshot[part].pop(key)


# Each malformed snapshot file, and what its refusal names. Every one is refused with a message naming the file
# and the field; none raises anything else (seven of fifteen like these once ended in tracebacks, some after the
# virtualenv link had moved).
MALFORMED = [
    ("truncated JSON", b'{"format": 1, "venv": {"path": "/home/sglang/ml-env", "tar', "is not JSON"),
    ("not UTF-8", b'{"format": 1, "venv": "\xff"}', "is not JSON"),
    ("nested too deep", b"[" * 100000, "nested too deep"),
    ("a JSON list", b"[]", "it holds a list, not a snapshot object"),
    ("a JSON string", b'"pre-upgrade"', "it holds a string, not a snapshot object"),
    ("format true", edited(setting("format", True)), "format is True, not 1"),
    ("format as text", edited(setting("format", "1")), "format is '1', not 1"),
    ("an extra key", edited(setting("hook", "touch /tmp/x")), "the snapshot holds 'hook', which no snapshot records"),
    ("venv a list", edited(setting("venv", [])), "venv is a list, not an object"),
    ("venv without its target", edited(dropping("venv", "target")), "venv lacks target"),
    ("venv.target the root", edited(setting("venv", "target", "/")), "venv.target is '/', not the name of"),
    ("venv.target up and out", edited(setting("venv", "target", "../../root")), "venv.target is '../../root'"),
    ("venv.target a number", edited(setting("venv", "target", 5)), "venv.target is 5"),
    ("venv.target another name", edited(setting("venv", "target", "other.cu128-1a2b3c4d")),
     "venv.target is 'other.cu128-1a2b3c4d'"),
    ("venv.profile with an escape", edited(setting("venv", "profile", "cu128\x1b[2J")), "venv.profile is"),
    ("cuda null", edited(setting("cuda", None)), "cuda is null, not an object"),
    ("cuda.target root's home", edited(lambda s: s["cuda"].update(alternative=None, target="/root")),
     "cuda.target is '/root', not a CUDA installation (/usr/local/cuda-<major>.<minor>, or a cuda_home whose last "
     "name says cuda)"),
    ("cuda.target the alternative's link without one", edited(lambda s: s["cuda"].update(alternative=None)),
     "cuda.target is '/etc/alternatives/cuda', not a CUDA installation"),
    ("cuda.target elsewhere with an alternative", edited(setting("cuda", "target", "/tmp/cuda")),
     "cuda.target is '/tmp/cuda', not /etc/alternatives/cuda, where the cuda alternative manages the link"),
    ("cuda.alternative a number", edited(setting("cuda", "alternative", 13)), "cuda.alternative is 13"),
    ("cuda.alternative an option", edited(setting("cuda", "alternative", "--remove-all")),
     "cuda.alternative is '--remove-all'"),
    ("files a list", edited(setting("files", [])), "files is a list, not an object"),
    ("files without the profile script", edited(dropping("files", PROFILE_SCRIPT)), "files lacks " + PROFILE_SCRIPT),
    ("a file's text a number", edited(setting("files", LINKER_CONF, 42)),
     "files[%s] is a number, not the file's text" % LINKER_CONF),
    ("ESC in the profile script", edited(setting("files", PROFILE_SCRIPT, "\x1b]0;x\x07" + OLD_SH)),
     "files[%s] line 1: the value holds the control character U+001B" % PROFILE_SCRIPT),
    ("a carriage return in the linker file", edited(setting("files", LINKER_CONF, CUDA_OLD + "/lib64\r\n")),
     "files[%s] line 1: the value holds the control character U+000D" % LINKER_CONF),
    ("a command in the profile script", edited(setting("files", PROFILE_SCRIPT, OLD_SH + "curl x | sh\n")),
     "files[%s] line 2 is 'curl x | sh', not a comment or a line of the cuda role's profile.sh.j2" % PROFILE_SCRIPT),
    ("an include in the linker file", edited(setting("files", LINKER_CONF, "include /home/sglang/x.conf\n")),
     "files[%s] line 1 is 'include /home/sglang/x.conf', not a comment or an absolute directory" % LINKER_CONF),
    ("disabled_linker_files a string", edited(setting("disabled_linker_files", "a.conf" + DISABLED_SUFFIX)),
     "disabled_linker_files is a string, not a list of names"),
    ("disabled_linker_files holding null", edited(setting("disabled_linker_files", [None])),
     "disabled_linker_files[0] is None"),
    ("disabled_linker_files holding the suffix alone", edited(setting("disabled_linker_files", [DISABLED_SUFFIX])),
     "disabled_linker_files[0] is '%s'" % DISABLED_SUFFIX),
    ("server.argv a string", edited(setting("server", "argv", "python -m sglang.launch_server")),
     "server.argv is 'python -m sglang.launch_server', not a command line"),
    ("server.argv holding a number", edited(setting("server", "argv", ["python", 1])), "server.argv is"),
    ("server a string", edited(setting("server", "sglang")), "server is a string, not an object"),
]


@pytest.mark.parametrize("data,field", [entry[1:] for entry in MALFORMED], ids=[entry[0] for entry in MALFORMED])
def test_every_malformed_snapshot_is_refused_naming_the_file_and_the_field(data, field):
    with pytest.raises(InvalidOption) as refused:
        parsed_snapshot(data, SNAPSHOT_FILE, VENV)
    assert str(refused.value).startswith("The snapshot %s " % SNAPSHOT_FILE)
    assert field in str(refused.value)


def test_the_table_covers_every_key_of_a_snapshot():
    assert len(MALFORMED) >= 15
    fields = " ".join(field for _name, _data, field in MALFORMED)
    for key in ("format", "venv", "venv.target", "venv.profile", "cuda", "cuda.target", "cuda.alternative",
                "files", "disabled_linker_files", "server", "server.argv"):
        assert key in fields


def test_a_valid_snapshot_parses_as_it_was_recorded():
    assert parsed_snapshot(serialized(valid()).encode(), SNAPSHOT_FILE, VENV) == valid()
    for server in (None, {"problem": "The state file cannot be trusted"}):
        snapshot = valid()
        snapshot["server"] = server
        assert snapshot_problems(snapshot, VENV) == []


def test_a_snapshot_file_carries_the_sha256_of_its_content_and_parses_back_without_it():
    text = file_text(valid())
    assert json.loads(text)["sha256"] == hashlib.sha256(serialized(valid()).encode()).hexdigest()
    assert parsed_snapshot(text.encode(), SNAPSHOT_FILE, VENV) == valid()
    # A file of an earlier release, without a checksum, is taken as it is.
    assert parsed_snapshot(serialized(valid()).encode(), SNAPSHOT_FILE, VENV) == valid()


@pytest.mark.parametrize("spoil", [
    lambda document: document["venv"].update(target=NEW),
    lambda document: document["disabled_linker_files"].append("x.conf" + DISABLED_SUFFIX),
    lambda document: document.update(sha256="0" * 64),
    lambda document: document.update(sha256=None),
])
def test_a_snapshot_file_changed_since_it_was_written_is_refused_naming_it(spoil):
    document = json.loads(file_text(valid()))
    spoil(document)
    with pytest.raises(InvalidOption) as refused:
        parsed_snapshot(json.dumps(document).encode(), SNAPSHOT_FILE, VENV)
    assert str(refused.value) == ("The snapshot %s was changed after it was recorded: its sha256 does not match its "
                                  "content" % SNAPSHOT_FILE)


def test_the_last_resort_changes_only_the_stable_path(before, after):
    last = venv_only(after, OLD, "cu128")
    assert last["venv"] == {"path": VENV, "target": OLD, "profile": "cu128"}
    assert dict(last, venv=None) == dict(after, venv=None)
    assert after["venv"]["target"] == NEW
    actions, problems = restore_plan(last, after, AFTER_FILES, host())
    assert (actions, problems) == ([{"action": "link", "path": VENV, "target": OLD}], [])


def test_a_node_without_a_stack_yet_is_a_valid_snapshot():
    empty = observation(VENV, None, None, None, None, {LINKER_CONF: None, PROFILE_SCRIPT: None}, [], None)
    assert snapshot_problems(empty, VENV) == []


def rendered(name, cuda_home):
    environment = jinja2.Environment(loader=jinja2.FileSystemLoader(os.path.join(ROOT, "roles", "cuda", "templates")),
                                     keep_trailing_newline=True)
    environment.filters.update(FilterModule().filters())
    return environment.get_template(name).render(ansible_managed="Ansible managed", cuda_home=cuda_home,
                                                 stack_selected={"cuda": {"series": "13.0"}})


@pytest.mark.parametrize("cuda_home", [CUDA_NEW, "/opt/it's cuda"])
def test_what_the_cuda_roles_templates_render_is_accepted(cuda_home):
    assert text_problems(PROFILE_SCRIPT, rendered("profile.sh.j2", cuda_home)) == []
    if " " not in cuda_home:
        assert text_problems(LINKER_CONF, rendered("ld.so.conf.j2", cuda_home)) == []


def test_an_export_that_is_not_one_quoted_path_is_refused():
    for line in ("export CUDA_HOME=/a;id", "export CUDA_HOME='/a", "export CUDA_HOME=/a /b", "export CUDA_HOME=a",
                 "export CUDA_HOME='/a'", "export PATH=/tmp"):
        assert text_problems(PROFILE_SCRIPT, line + "\n") != [], line


@pytest.mark.parametrize("data,profile", [
    (b'{"profile": "cu128", "digest": "1a2b3c4d"}', "cu128"),
    (None, None),
    (b"\x00" * 10, None),
    (b'["cu128"]', None),
    (b'{"profile": 5}', None),
    (b'{"profile": "cu128\\n"}', None),
    (b"[" * 70000, None),
])
def test_a_marker_names_a_profile_only_when_it_is_a_json_object_with_one(data, profile):
    assert marker_profile(data) == profile


def test_the_server_is_kept_with_the_recorded_secret_flags_masked():
    state = {"argv": ["python", "--api-key", "k1", "--hf-token", "hf_x", "--custom-secret=c3"],
             "secret_flags": ["--hf-token", "--custom-secret"], "env_digest": "d"}
    assert server_record(state) == {"argv": ["python", "--api-key", MASK, "--hf-token", MASK,
                                             "--custom-secret=" + MASK], "env_digest": "d"}
    assert server_secrets(state) == ["k1", "hf_x", "c3"]
    assert server_record(dict(state, secret_flags=None))["problem"].startswith("its secret_flags is not")
    assert server_secrets(dict(state, secret_flags="--hf-token")) == []
    assert server_record(None) is None and server_secrets(None) == []
    del state["secret_flags"]
    assert server_record(state)["argv"][-3:] == ["--hf-token", "hf_x", "--custom-secret=c3"]


class FakeNode(object):
    """A host that records every call and fails where told: fail maps a call ("stage", "apply", "begin", "end")
    to the path or action kind that fails there."""

    marker_path = "/var/lib/blackwell-gpu-node/snapshots/.restore-in-progress"

    def __init__(self, **fail):
        self.fail, self.calls = fail, []

    def _maybe_fail(self, call, key):
        if self.fail.get(call) == key:
            if key == "ldconfig":
                raise StepFailed("ldconfig exited with 1: boom")
            raise OSError(errno.ENOSPC, "No space left on device", "tmp-name-not-the-file")

    def stage(self, action):
        self.calls.append(("stage", action["path"]))
        self._maybe_fail("stage", action["path"])
        return "tmp:" + action["path"]

    def discard(self, action, token):
        self.calls.append(("discard", token))

    def apply(self, action, token):
        self.calls.append(("apply", action["action"], token))
        self._maybe_fail("apply", action["action"])

    def begin(self):
        self.calls.append(("begin",))
        self._maybe_fail("begin", True)

    def end(self):
        self.calls.append(("end",))


def test_everything_new_is_staged_before_the_marker_and_the_first_change():
    fake = FakeNode()
    done = carry_out(FULL_RESTORE, fake)
    assert fake.calls == [
        ("stage", VENV), ("stage", LINKER_CONF), ("stage", PROFILE_SCRIPT), ("begin",),
        ("apply", "link", "tmp:" + VENV), ("apply", "alternative", None), ("apply", "write", "tmp:" + LINKER_CONF),
        ("apply", "write", "tmp:" + PROFILE_SCRIPT), ("apply", "rename", None), ("apply", "ldconfig", None),
        ("end",),
    ]
    assert done == [describe(action) for action in FULL_RESTORE]


def test_a_full_disk_while_staging_changes_nothing_and_names_the_file():
    fake = FakeNode(stage=PROFILE_SCRIPT)
    with pytest.raises(RestoreStopped) as stopped:
        carry_out(FULL_RESTORE, fake)
    assert [call for call in fake.calls if call[0] in ("apply", "begin")] == []
    assert ("discard", "tmp:" + VENV) in fake.calls and ("discard", "tmp:" + LINKER_CONF) in fake.calls
    assert stopped.value.done == []
    assert stopped.value.message(SNAPSHOT_FILE) == (
        "The restore of %s stopped before its first change: staging %s rewritten as recorded failed on %s: No "
        "space left on device. Nothing was changed; the files staged for it were removed."
        % (SNAPSHOT_FILE, PROFILE_SCRIPT, PROFILE_SCRIPT))


def test_no_marker_written_changes_nothing():
    fake = FakeNode(begin=True)
    with pytest.raises(RestoreStopped) as stopped:
        carry_out(FULL_RESTORE, fake)
    assert stopped.value.done == [] and stopped.value.path == FakeNode.marker_path
    assert [call for call in fake.calls if call[0] == "apply"] == []
    assert len([call for call in fake.calls if call[0] == "discard"]) == 3


def test_a_failure_part_way_says_what_was_done_and_leaves_the_marker():
    fake = FakeNode(apply="ldconfig")
    with pytest.raises(RestoreStopped) as stopped:
        carry_out(FULL_RESTORE, fake)
    assert stopped.value.done == [describe(action) for action in FULL_RESTORE[:-1]]
    assert ("end",) not in fake.calls
    message = stopped.value.message(SNAPSHOT_FILE)
    assert message.startswith("The restore of %s stopped part-way: ldconfig failed on the dynamic linker's cache: "
                              "ldconfig exited with 1: boom. Done before it: %s -> %s; " % (SNAPSHOT_FILE, VENV, OLD))
    assert message.endswith("run state=restored again: it finishes the restore, ldconfig included.")


def test_a_staged_file_not_yet_renamed_is_discarded_when_an_earlier_step_fails():
    fake = FakeNode(apply="alternative")
    with pytest.raises(RestoreStopped) as stopped:
        carry_out(FULL_RESTORE, fake)
    assert stopped.value.done == [describe(FULL_RESTORE[0])]
    assert stopped.value.path == "/usr/local/cuda (the cuda alternative)"
    assert [call for call in fake.calls if call[0] == "discard"] == [("discard", "tmp:" + LINKER_CONF),
                                                                     ("discard", "tmp:" + PROFILE_SCRIPT)]


def test_the_marker_names_its_snapshot_and_any_other_text_still_counts_as_a_marker():
    assert in_progress_snapshot(in_progress_text("pre-upgrade").encode()) == "pre-upgrade"
    for data in (b"", b"{", b'{"snapshot": "../x"}', b"[]", b"\xff"):
        assert in_progress_snapshot(data) == ""


def test_decoded_json_refuses_nesting_too_deep_as_a_value_error():
    with pytest.raises(ValueError):
        decoded_json(b"{" * 100000)


@pytest.mark.parametrize("name", ["pre-upgrade", "a.b_c-1"])
def test_names_that_name_one_file_are_accepted(name):
    assert name_problem(name) is None


@pytest.mark.parametrize("name", ["", "../x", "a/b", "a..b", ".hidden", ".restore-in-progress", "x\n", "a" * 65])
def test_names_that_could_leave_the_directory_are_refused(name):
    assert "name=" in name_problem(name)


def test_the_serialized_snapshot_is_stable(before):
    assert serialized(before) == serialized(copy.deepcopy(before))
    assert serialized(before).endswith("}\n")


def test_the_files_are_the_cuda_roles_registration_files_and_the_suffix_is_cuda_linker_entries_default():
    with open(os.path.join(ROOT, "roles", "cuda", "vars", "main.yml")) as handle:
        cuda_vars = yaml.safe_load(handle)
    declared = cuda_vars["__cuda_registration_files"]
    assert [(LINKER_CONF, True), (PROFILE_SCRIPT, False)] == [(file["path"], file["linker"]) for file in declared]
    with open(os.path.join(ROOT, "plugins", "modules", "cuda_linker_entries.py")) as handle:
        assert 'suffix=dict(type="str", default="%s")' % DISABLED_SUFFIX in handle.read()


def test_the_whole_observation():
    assert observation(VENV, OLD, "cu128", None, CUDA_OLD, {LINKER_CONF: None},
                       ["a.conf", "b.conf" + DISABLED_SUFFIX], {"argv": ["python"]}) == {
        "format": 1,
        "venv": {"path": VENV, "target": OLD, "profile": "cu128"},
        "cuda": {"path": "/usr/local/cuda", "alternative": None, "target": CUDA_OLD},
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
    tampered["disabled_linker_files"] = [5, "sub/x.conf" + DISABLED_SUFFIX, "x.conf", "..", "x\n" + DISABLED_SUFFIX]
    assert snapshot_problems(tampered, VENV) == [
        "disabled_linker_files[%d] is %r, not a file name in /etc/ld.so.conf.d ending in %s"
        % (index, name, DISABLED_SUFFIX) for index, name in enumerate(tampered["disabled_linker_files"])]


@pytest.mark.parametrize("action,line", [
    ({"action": "alternative", "name": "cuda", "value": CUDA_OLD}, "update-alternatives --set cuda " + CUDA_OLD),
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


@pytest.mark.parametrize("path, accepted", [
    ("/usr/local/cuda-13.0", True), ("/usr/local/cuda-12.8", True), ("/opt/nvidia/cuda", True),
    ("/opt/cuda-13.0.1", True), ("/", False), ("/root", False), ("/etc/alternatives/cuda", False),
    ("/usr/local/cuda-13.0/../../..", False), ("/opt/cu da", False), ("/opt/cuda:x", False), ("cuda-13.0", False),
    ("/usr//cuda", False), ("/usr/local/.cuda/cuda", False), ("/usr/local/", False), ("/.cuda", True),
])
def test_a_snapshot_points_usr_local_cuda_at_a_cuda_installation_only(path, accepted):
    assert is_cuda_home(path) is accepted
