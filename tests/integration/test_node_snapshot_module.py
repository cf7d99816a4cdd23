"""node_snapshot, run as root, in a private mount namespace whose /etc/ld.so.conf.d,
/etc/profile.d, alternatives and /usr/local are a temporary tree (private_tree.py): the virtualenv is another
user's, the snapshots root's, and the host's own files are never touched."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_module

HELPER = Path(__file__).with_name("private_tree.py")
OLD, NEW = "ml-env.cu128-1a2b3c4d", "ml-env.cu130-5e6f7a8b"
CUDA_OLD, CUDA_NEW = "/usr/local/cuda-12.8", "/usr/local/cuda-13.0"
LINKER_CONF = "etc/ld.so.conf.d/000-blackwell-gpu-node-cuda.conf"
PROFILE_SCRIPT = "etc/profile.d/blackwell-gpu-node-cuda.sh"
STALE = "etc/ld.so.conf.d/987_cuda-12.conf"
SUFFIX = ".disabled-by-blackwell-gpu-node"
NOBODY = 65534
FAKE_LDCONFIG = """#!/bin/sh
echo "$@" >> {tree}/ldconfig.calls
if [ -e {tree}/ldconfig.fails ]; then echo 'ldconfig: cannot write the cache' >&2; exit 1; fi
"""
# A module that blocks or reads without bound would take the full timeout; a normal run takes a few seconds.
BOUND_S = 60


def profile_script(home):
    return ("# Ansible managed\n# CUDA for login shells.\nexport CUDA_HOME=%s\ncase \":$PATH:\" in\n"
            "  *\":$CUDA_HOME/bin:\"*) ;;\n  *) export PATH=\"$CUDA_HOME/bin:$PATH\" ;;\nesac\n" % home)


class Tree(object):
    """The temporary host: its paths, and commands and module runs inside its namespace."""

    def __init__(self, root):
        self.root = root
        self.venv_path = str(root / "home" / "sglang" / "ml-env")
        self.state_dir = str(root / "state")
        self.snapshots = root / "state" / "snapshots"

    def path(self, relative):
        return self.root / relative

    def prefix(self, full=None):
        return (["unshare", "-m", "--propagation", "private", sys.executable, str(HELPER), str(self.root)]
                + (["--full", full] if full else []) + ["--"])

    def run(self, *argv):
        subprocess.run(self.prefix() + list(argv), check=True, capture_output=True, timeout=BOUND_S)

    def module(self, check_mode=False, full=None, module_name="node_snapshot", **args):
        args.setdefault("venv_path", self.venv_path)
        args.setdefault("state_dir", self.state_dir)
        args.setdefault("server_state_dir", str(self.root / "server"))
        return run_module(module_name, check_mode=check_mode, run_timeout=BOUND_S, prefix=self.prefix(full), **args)

    def info(self, check_mode=False, **args):
        """node_snapshot_info's result: what the node runs and the recorded snapshot."""
        return self.module(check_mode=check_mode, module_name="node_snapshot_info", **args)

    def alternative(self):
        shown = subprocess.run(self.prefix() + ["update-alternatives", "--query", "cuda"], capture_output=True,
                               text=True, timeout=BOUND_S, check=False)
        return [line[len("Value: "):] for line in shown.stdout.splitlines() if line.startswith("Value: ")]

    def stack(self):
        """What decides the stack the tree's node runs."""
        return {
            "venv": os.readlink(self.venv_path),
            "alternative": self.alternative(),
            "conf": self.path(LINKER_CONF).read_text(),
            "script": self.path(PROFILE_SCRIPT).read_text(),
            "linker_files": sorted(os.listdir(self.path("etc/ld.so.conf.d"))),
            "profile_d": sorted(os.listdir(self.path("etc/profile.d"))),
            "home": sorted(os.listdir(self.path("home/sglang"))),
        }

    def ldconfig_runs(self):
        """How often the cache was rebuilt: `ldconfig -p` (ctypes asks it where libraries are) only reads it."""
        calls = self.path("ldconfig.calls")
        return calls.read_text().splitlines().count("") if calls.exists() else 0

    def upgrade(self):
        """What the upgrade playbook changes on the node: the link, the alternative, the cuda role's files."""
        replace_link(self.venv_path, NEW)
        self.run("update-alternatives", "--set", "cuda", CUDA_NEW)
        self.path(LINKER_CONF).write_text(CUDA_NEW + "/lib64\n")
        self.path(PROFILE_SCRIPT).write_text(profile_script(CUDA_NEW))
        os.rename(self.path(STALE), str(self.path(STALE)) + SUFFIX)


def replace_link(path, target):
    os.symlink(target, path + ".new")
    os.lchown(path + ".new", NOBODY, NOBODY)
    os.replace(path + ".new", path)


@pytest.fixture
def tree(tmp_path):
    tree = Tree(tmp_path)
    for directory in ("etc/ld.so.conf.d", "etc/profile.d", "etc/alternatives", "var/lib/dpkg/alternatives",
                      "var/log", "usr/local/cuda-12.8/lib64", "usr/local/cuda-13.0/lib64", "server"):
        tree.path(directory).mkdir(parents=True)
    ldconfig = tree.path("ldconfig")
    ldconfig.write_text(FAKE_LDCONFIG.format(tree=tmp_path))
    ldconfig.chmod(0o755)
    home = tree.path("home/sglang")
    for venv in (OLD, NEW):
        (home / venv).mkdir(parents=True)
        (home / venv / "ml-stack.json").write_text(json.dumps({"profile": venv.split(".")[1].split("-")[0]}))
        os.chown(home / venv, NOBODY, NOBODY)
    os.chown(home, NOBODY, NOBODY)
    os.symlink(OLD, tree.venv_path)
    os.lchown(tree.venv_path, NOBODY, NOBODY)
    tree.path(LINKER_CONF).write_text(CUDA_OLD + "/lib64\n")
    tree.path(PROFILE_SCRIPT).write_text(profile_script(CUDA_OLD))
    tree.path(STALE).write_text("/usr/local/cuda-12/targets/x86_64-linux/lib\n")
    for home_dir, priority in ((CUDA_OLD, "128"), (CUDA_NEW, "130")):
        tree.run("update-alternatives", "--install", "/usr/local/cuda", "cuda", home_dir, priority)
    tree.run("update-alternatives", "--set", "cuda", CUDA_OLD)
    return tree


@pytest.fixture
def upgraded(tree):
    """A node recorded before its upgrade, and upgraded since."""
    recorded = tree.module(state="recorded")
    assert recorded["changed"] is True, recorded
    tree.upgrade()
    return tree


def test_a_restore_puts_back_the_stack_recorded_before_the_upgrade(tree):
    before = tree.stack()
    recorded = tree.module(state="recorded")
    assert recorded["snapshot"]["venv"] == {"path": tree.venv_path, "target": OLD, "profile": "cu128"}
    assert recorded["snapshot"]["cuda"] == {"path": "/usr/local/cuda", "alternative": CUDA_OLD,
                                            "target": "/etc/alternatives/cuda"}
    snapshot = os.stat(tree.snapshots / "pre-upgrade.json")
    assert (snapshot.st_uid, snapshot.st_mode & 0o777) == (0, 0o600)
    tree.upgrade()
    assert tree.stack() != before
    restored = tree.module(state="restored")
    assert restored["changed"] is True, restored
    assert restored["actions"][0] == "%s -> %s" % (tree.venv_path, OLD)
    assert restored["actions"][-1] == "ldconfig"
    assert tree.stack() == before
    assert os.lstat(tree.venv_path).st_uid == NOBODY
    assert tree.ldconfig_runs() == 1
    again = tree.module(state="restored")
    assert (again["changed"], again["actions"]) == (False, [])
    assert not (tree.snapshots / ".restore-in-progress").exists()


def test_the_info_module_shows_what_a_recording_writes_and_the_recorded_snapshot_and_changes_nothing(tree):
    before = tree.info()
    assert (before["changed"], before["snapshot"]) == (False, None), before
    assert before["path"] == str(tree.snapshots / "pre-upgrade.json") and not tree.snapshots.exists()
    recorded = tree.module(state="recorded")
    tree.upgrade()
    for check_mode in (True, False):
        shown = tree.info(check_mode=check_mode)
        assert (shown["changed"], shown["snapshot"]) == (False, recorded["snapshot"]), shown
        assert shown["current"]["venv"] == {"path": tree.venv_path, "target": NEW, "profile": "cu130"}, shown
    assert tree.module()["failed"] is True  # node_snapshot itself only records or restores


@pytest.mark.parametrize("hostile", ["fifo", "dev-zero"])
def test_a_fifo_or_a_link_to_dev_zero_as_the_marker_is_no_profile_and_no_hang(tree, hostile):
    marker = tree.path("home/sglang") / OLD / "ml-stack.json"
    marker.unlink()
    if hostile == "fifo":
        os.mkfifo(marker)
    else:
        os.symlink("/dev/zero", marker)
    os.lchown(marker, NOBODY, NOBODY)
    current = tree.info()  # run_module kills the whole tree after BOUND_S
    assert current["current"]["venv"] == {"path": tree.venv_path, "target": OLD, "profile": None}


def test_a_venv_link_that_leaves_its_directory_is_entered_nowhere(tree):
    replace_link(tree.venv_path, "/root")
    current = tree.info()
    assert current["current"]["venv"] == {"path": tree.venv_path, "target": "/root", "profile": None}
    refused = tree.module(state="recorded")
    assert refused["failed"] is True
    assert "venv.target is '/root', not the name of a profile's virtualenv" in refused["msg"]
    assert not tree.snapshots.exists()


def test_a_snapshot_another_user_could_have_changed_is_refused(upgraded):
    upgraded.snapshots.chmod(0o777)
    refused = upgraded.module(state="restored")
    assert refused["failed"] is True and refused.get("changed", False) is False
    assert refused["msg"].startswith("the snapshots of state_dir=%s: %s its group or others can write it (mode 0777)"
                                     % (upgraded.snapshots, upgraded.snapshots))
    upgraded.snapshots.chmod(0o700)
    os.chown(upgraded.snapshots / "pre-upgrade.json", NOBODY, NOBODY)
    refused = upgraded.module(state="restored")
    assert refused["msg"].startswith("The snapshot %s is not trusted: it belongs to uid 65534"
                                     % (upgraded.snapshots / "pre-upgrade.json"))
    assert os.readlink(upgraded.venv_path) == NEW


MALFORMED = {
    "target-root": ("venv", "target", "/"),
    "target-number": ("venv", "target", 5),
    "cuda-root": ("cuda", "alternative", "/root"),
    "script-escape": ("files", "/etc/profile.d/blackwell-gpu-node-cuda.sh", "\x1b]0;x\x07export CUDA_HOME=/a\n"),
    "conf-number": ("files", "/etc/ld.so.conf.d/000-blackwell-gpu-node-cuda.conf", 42),
    "argv-text": ("server", None, "python -m sglang.launch_server"),
}


def test_malformed_snapshots_are_refused_naming_the_file_and_the_field_before_any_change(upgraded):
    good = json.loads((upgraded.snapshots / "pre-upgrade.json").read_text())
    # Without the checksum, as an earlier release wrote it: every field is still checked.
    assert len(good.pop("sha256")) == 64
    files = {"truncated": '{"format": 1, "venv": {"pa', "nested": "[" * 100000}
    for name, (part, key, value) in MALFORMED.items():
        snapshot = json.loads(json.dumps(good))
        if key is None:
            snapshot[part] = value
        else:
            snapshot[part][key] = value
        files[name] = json.dumps(snapshot)
    for name, text in files.items():
        (upgraded.snapshots / (name + ".json")).write_text(text)
        os.chmod(upgraded.snapshots / (name + ".json"), 0o600)
    after_upgrade = upgraded.stack()
    for name in files:
        refused = upgraded.module(state="restored", name=name)
        assert refused["failed"] is True and "module_stderr" not in refused, refused
        assert refused["msg"].startswith("The snapshot %s " % (upgraded.snapshots / (name + ".json"))), refused
        assert refused["msg"].endswith("Nothing was changed.")
        field = {"truncated": "is not JSON", "nested": "nested too deep"}.get(name) or (
            "%s.%s" % MALFORMED[name][:2] if name not in ("script-escape", "conf-number", "argv-text")
            else {"script-escape": "files[/etc/profile.d/blackwell-gpu-node-cuda.sh] line 1",
                  "conf-number": "files[/etc/ld.so.conf.d/000-blackwell-gpu-node-cuda.conf] is a number",
                  "argv-text": "server is a string"}[name])
        assert field in refused["msg"], (name, refused["msg"])
        assert upgraded.stack() == after_upgrade


def test_a_full_disk_stops_the_restore_before_its_first_change_and_a_retry_does_it_all(upgraded):
    after_upgrade = upgraded.stack()
    full = upgraded.module(state="restored", full="/etc/profile.d")
    assert full["failed"] is True and full["changed"] is False, full
    assert full["msg"] == (
        "The restore of %s stopped before its first change: staging /etc/profile.d/blackwell-gpu-node-cuda.sh "
        "rewritten as recorded failed on /etc/profile.d/blackwell-gpu-node-cuda.sh: No space left on device. "
        "Nothing was changed; the files staged for it were removed." % (upgraded.snapshots / "pre-upgrade.json"))
    assert upgraded.stack() == after_upgrade  # no temporary file left in either directory either
    assert upgraded.ldconfig_runs() == 0
    assert not (upgraded.snapshots / ".restore-in-progress").exists()
    retried = upgraded.module(state="restored")
    assert retried["changed"] is True and retried["actions"][-1] == "ldconfig"
    assert upgraded.stack()["venv"] == OLD and upgraded.ldconfig_runs() == 1


def test_a_restore_stopped_part_way_says_what_it_did_and_the_retry_finishes_it_with_ldconfig(upgraded):
    upgraded.path("ldconfig.fails").write_text("")
    stopped = upgraded.module(state="restored")
    assert stopped["failed"] is True and stopped["changed"] is True, stopped
    assert stopped["actions"] == [
        "%s -> %s" % (upgraded.venv_path, OLD), "update-alternatives --set cuda /usr/local/cuda-12.8",
        "/etc/ld.so.conf.d/000-blackwell-gpu-node-cuda.conf rewritten as recorded",
        "/etc/profile.d/blackwell-gpu-node-cuda.sh rewritten as recorded",
        "/etc/ld.so.conf.d/987_cuda-12.conf%s renamed back to /etc/ld.so.conf.d/987_cuda-12.conf" % SUFFIX]
    assert "stopped part-way: ldconfig failed on the dynamic linker's cache: ldconfig exited with 1: ldconfig: " \
           "cannot write the cache. Done before it: " in stopped["msg"]
    marker = os.stat(upgraded.snapshots / ".restore-in-progress")
    assert (marker.st_uid, marker.st_mode & 0o777) == (0, 0o600)
    refused = upgraded.module(state="recorded")
    assert refused["failed"] is True and "finish it with state=restored" in refused["msg"]
    upgraded.path("ldconfig.fails").unlink()
    predicted = upgraded.module(check_mode=True, state="restored")
    assert (predicted["changed"], predicted["actions"]) == (True, ["ldconfig"])
    finished = upgraded.module(state="restored")
    assert (finished["changed"], finished["actions"], finished["finished_earlier_restore"]) == (
        True, ["ldconfig"], True)
    assert "finished an earlier one (of pre-upgrade)" in finished["msg"]
    assert upgraded.ldconfig_runs() == 2  # the one that failed, and the one that finished
    assert not (upgraded.snapshots / ".restore-in-progress").exists()
    assert upgraded.module(state="restored")["changed"] is False


def test_an_alternative_no_longer_registered_is_refused_in_check_mode_as_in_a_real_run(upgraded):
    upgraded.run("update-alternatives", "--remove", "cuda", CUDA_OLD)
    after_upgrade = upgraded.stack()
    for check_mode in (True, False):
        refused = upgraded.module(check_mode=check_mode, state="restored")
        assert refused["failed"] is True, refused
        assert ("the cuda alternative no longer offers /usr/local/cuda-12.8 (update-alternatives --list cuda: "
                "/usr/local/cuda-13.0)") in refused["msg"]
        assert upgraded.stack() == after_upgrade


def test_the_recorded_secret_flags_mask_the_server_command_line(tree):
    argv = ["python", "-m", "sglang.launch_server", "--hf-token", "hf_SECRET", "--api-key=k_SECRET"]
    state = {"pid": 4242, "start_time": 1, "argv": argv, "env_digest": "d", "log_path": "/tmp/x.log", "offset": 0,
             "secret_flags": ["--hf-token"]}
    (tree.path("server") / "sglang.json").write_text(json.dumps(state))
    recorded = tree.module(state="recorded")
    assert recorded["snapshot"]["server"]["argv"] == ["python", "-m", "sglang.launch_server", "--hf-token",
                                                      "********", "--api-key=********"]
    assert "SECRET" not in json.dumps(recorded)
    assert "SECRET" not in (tree.snapshots / "pre-upgrade.json").read_text()


@pytest.mark.parametrize("spoil", ["missing", "others-can-write", "not-json"])
def test_a_lost_or_spoiled_snapshot_file_is_replaced_by_the_one_the_run_recorded(tree, spoil):
    before = tree.stack()
    recorded = tree.module(state="recorded")
    tree.upgrade()
    snapshot_file = tree.snapshots / "pre-upgrade.json"
    if spoil == "missing":
        snapshot_file.unlink()
    elif spoil == "others-can-write":
        snapshot_file.chmod(0o666)
    else:
        snapshot_file.write_text("{")
    without = tree.module(state="restored")
    assert without["failed"] is True and os.readlink(tree.venv_path) == NEW, without
    restored = tree.module(state="restored", snapshot=recorded["snapshot"])
    assert restored["changed"] is True and restored["source"] == "option", restored
    assert "the snapshot this run recorded is restored instead" in " ".join(restored["warnings"])
    assert tree.stack() == before
    forged = dict(recorded["snapshot"], venv=dict(recorded["snapshot"]["venv"], target="/root"))
    tree.upgrade()
    refused = tree.module(state="restored", snapshot=forged)
    assert refused["failed"] is True and "given as snapshot cannot be restored" in refused["msg"], refused
    assert os.readlink(tree.venv_path) == NEW


def test_a_snapshot_file_a_restore_would_refuse_never_blocks_recording_again(tree):
    tree.module(state="recorded")
    snapshot_file = tree.snapshots / "pre-upgrade.json"
    os.chown(snapshot_file, NOBODY, NOBODY)
    recorded = tree.module(state="recorded")
    assert recorded["changed"] is True and not recorded.get("failed"), recorded
    assert "is not trusted" in " ".join(recorded["warnings"]) and "renamed to" in " ".join(recorded["warnings"])
    assert os.stat(snapshot_file).st_uid == 0
    (aside,) = [name for name in os.listdir(tree.snapshots) if name.startswith("pre-upgrade.json.refused-")]
    assert os.stat(tree.snapshots / aside).st_uid == NOBODY
    assert tree.module(state="restored")["changed"] is False


def spoil_in_place(snapshot_file):
    """Edit a recorded file as a flipped bit would: root's, 0600, still a snapshot, its checksum left as it was."""
    document = json.loads(snapshot_file.read_text())
    document["disabled_linker_files"] = ["999_other.conf" + SUFFIX]
    snapshot_file.write_text(json.dumps(document))


def test_recording_another_stack_keeps_the_snapshot_it_replaces(tree):
    first = tree.module(state="recorded")
    snapshot_file, previous = tree.snapshots / "pre-upgrade.json", tree.snapshots / "pre-upgrade.json.previous"
    assert json.loads(snapshot_file.read_text())["sha256"] and not previous.exists()
    recorded_first = snapshot_file.read_bytes()
    assert tree.module(state="recorded")["changed"] is False and not previous.exists()
    tree.upgrade()
    second = tree.module(state="recorded")
    assert second["changed"] is True and second["snapshot"] != first["snapshot"], second
    assert previous.read_bytes() == recorded_first
    assert (os.stat(previous).st_uid, os.stat(previous).st_mode & 0o777) == (0, 0o600)
    assert json.loads(snapshot_file.read_text())["venv"]["target"] == NEW


def test_a_spoiled_file_gives_way_to_the_snapshot_it_replaced_when_that_names_fallback_venv(tree):
    before = tree.stack()
    tree.module(state="recorded")
    (tree.path("server") / "sglang.json").write_text(json.dumps(
        {"pid": 4242, "start_time": 1, "argv": ["python", "-m", "sglang.launch_server"], "env_digest": "d",
         "log_path": "/tmp/x.log", "offset": 0}))
    assert tree.module(state="recorded")["changed"] is True
    tree.upgrade()
    spoil_in_place(tree.snapshots / "pre-upgrade.json")
    shown = tree.info()
    assert shown["snapshot"] is None and "was changed after it was recorded" in " ".join(shown["warnings"]), shown
    checked = tree.module(state="restored", check_mode=True)
    assert checked["changed"] is True and checked["source"] == "previous", checked
    assert os.readlink(tree.venv_path) == NEW
    restored = tree.module(state="restored", fallback_venv=OLD)
    assert restored["changed"] is True and restored["source"] == "previous", restored
    assert "pre-upgrade.json.previous, is restored instead" in restored["msg"]
    assert tree.stack() == before


def test_the_last_resort_points_the_stable_path_back_at_fallback_venv_alone(tree):
    tree.module(state="recorded")
    tree.upgrade()
    after_upgrade = tree.stack()
    (tree.snapshots / "pre-upgrade.json").unlink()
    missing = tree.module(state="restored")
    assert missing["failed"] is True and missing["msg"].startswith("No snapshot "), missing
    forged = tree.module(state="restored", fallback_venv="../../root")
    assert forged["failed"] is True and "fallback_venv=../../root cannot be restored: venv.target" in forged["msg"]
    assert tree.stack() == after_upgrade
    checked = tree.module(state="restored", fallback_venv=OLD, check_mode=True)
    assert checked["changed"] is True and tree.stack() == after_upgrade, checked
    restored = tree.module(state="restored", fallback_venv=OLD)
    assert restored["changed"] is True and restored["source"] == "fallback_venv", restored
    assert restored["actions"] == ["%s -> %s" % (tree.venv_path, OLD)]
    assert restored["snapshot"]["venv"] == {"path": tree.venv_path, "target": OLD, "profile": "cu128"}
    assert "only the stable path goes back, to fallback_venv=%s" % OLD in " ".join(restored["warnings"])
    assert tree.stack() == dict(after_upgrade, venv=OLD)
    assert tree.alternative() == [CUDA_NEW]


def test_a_kept_snapshot_of_another_virtualenv_than_fallback_venv_is_not_restored(tree):
    tree.module(state="recorded")
    tree.upgrade()
    tree.module(state="recorded")
    after_upgrade = tree.stack()
    (tree.snapshots / "pre-upgrade.json").chmod(0o666)
    kept = tree.module(state="restored", fallback_venv=NEW)
    assert kept["changed"] is False and kept["source"] == "fallback_venv", kept
    assert "names %s, not fallback_venv=%s" % (OLD, NEW) in kept["msg"]
    assert tree.stack() == after_upgrade
