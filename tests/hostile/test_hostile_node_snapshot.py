"""node_snapshot against a virtualenv, a marker and snapshots the service user made hostile: the marker is read
bounded or not at all, a stable link that leaves its directory is entered nowhere, a snapshot another user could
write or one edited with hostile values is never restored, and nothing outside the tree is written."""
import hashlib
import json
import os

import pytest

MODULE = "node_snapshot"
INFO = "node_snapshot_info"
OTHER_VENV = "ml-env.cu128-5e6f7a8b"
SNAPSHOT_WRITES = ()  # the snapshots go into the case's own state_dir, inside the tree: nothing outside


def setting(case):
    venv = case.make_venv()
    args = dict(venv_path=str(venv.stable), state_dir=str(case.private / "state"),
                server_state_dir=str(case.root_dir("server")))
    return venv, args


def look(case, args):
    """What the node runs, as the info module reads it (a baseline without it: node_snapshot's state=current)."""
    if case.collection.has_module(INFO):
        return case.module(INFO, args)
    return case.module(MODULE, dict(args, state="current"))


def profile_of(run):
    return (((run.result or {}).get("current") or {}).get("venv") or {}).get("profile")


def test_control_records_the_node(hostile):
    case = hostile(MODULE, "control: info, recorded")
    _venv, args = setting(case)
    current = look(case, args)
    case.check(current, "ok", problems=[] if profile_of(current) == "cu130" else ["profile %r" % profile_of(current)])
    recorded = case.module(MODULE, dict(args, state="recorded"))
    snapshot = case.private / "state" / "snapshots" / "pre-upgrade.json"
    case.check(recorded, "ok", problems=[] if snapshot.is_file() else ["no snapshot written"])
    case.finish()


MARKERS = {
    "marker FIFO": ("fifo", None),
    "marker -> /dev/zero": ("link", "/dev/zero"),
    "marker -> /etc/shadow": ("link", "/etc/shadow"),
    "marker sparse 8 GiB": ("sparse", None),
}


@pytest.mark.parametrize("name", sorted(MARKERS))
def test_a_hostile_marker_is_no_profile_and_costs_nothing(hostile, name):
    case = hostile(MODULE, name)
    venv, args = setting(case)
    kind, target = MARKERS[name]
    case.replace(venv.path / "ml-stack.json", kind, target)
    for what, run in (("the info module", look(case, args)),
                      ("state=recorded", case.module(MODULE, dict(args, state="recorded")))):
        case.check(run, "bounded", problems=[] if profile_of(run) is None else [
            "%s took the profile %r from it" % (what, profile_of(run))])
    case.finish()


def test_a_marker_swapped_with_a_fifo_in_a_loop_never_blocks(hostile):
    case = hostile(MODULE, "marker <-> FIFO swap loop")
    venv, args = setting(case)
    fifo = case.replace(venv.path / "swap.fifo", "fifo")
    with case.swapping(venv.path / "ml-stack.json", fifo):
        for _attempt in range(5):
            run = look(case, args)
            case.check(run, "bounded", problems=[] if profile_of(run) in ("cu130", None) else [
                "profile %r" % profile_of(run)])
    case.finish()


@pytest.mark.parametrize("target", ["/", "/etc"])
def test_a_stable_link_repointed_out_of_its_directory_is_entered_nowhere(hostile, target):
    case = hostile(MODULE, "stable link -> %s" % target)
    venv, args = setting(case)
    case.replace(venv.stable, "link", target)
    current = look(case, args)
    case.check(current, "bounded", problems=[] if profile_of(current) is None else ["profile %r" % profile_of(current)])
    recorded = case.module(MODULE, dict(args, state="recorded"))
    case.check(recorded, "refused", needle="venv.target")
    if (case.private / "state" / "snapshots" / "pre-upgrade.json").exists():
        case.problems.append("a snapshot of a link to %s was written" % target)
    case.finish()


def recorded_snapshot(case, args):
    """The snapshot a recording of the benign node writes (root's, in the case's state_dir), as JSON."""
    run = case.module(MODULE, dict(args, state="recorded"))
    case.check(run, "ok", setup=True)
    return json.loads((case.private / "state" / "snapshots" / "pre-upgrade.json").read_text())


def test_a_snapshot_in_a_state_dir_the_user_can_write_is_never_restored(hostile):
    case = hostile(MODULE, "state_dir the user can write")
    venv, args = setting(case)
    case.make_venv(OTHER_VENV, link=None, marker={"profile": "cu128"})
    snapshot = recorded_snapshot(case, args)
    snapshot["venv"].update(target=OTHER_VENV, profile="cu128")
    state_dir = case.user_dir("state")
    snapshots = case.user_dir("state/snapshots", 0o700)
    case.chown(case.replace(snapshots / "pre-upgrade.json", "file", json.dumps(snapshot)))
    os.chmod(str(snapshots / "pre-upgrade.json"), 0o600)
    user_args = dict(args, state_dir=str(state_dir))
    restored = case.module(MODULE, dict(user_args, state="restored"))
    case.check(restored, "refused", needle="state_dir=%s" % state_dir)
    recorded = case.module(MODULE, dict(user_args, state="recorded"))
    case.check(recorded, "refused", needle="state_dir=%s" % state_dir)
    if os.readlink(str(venv.stable)) != venv.path.name:
        case.problems.append("the stable link was moved to %s" % os.readlink(str(venv.stable)))
    case.finish()


EDITS = {
    "snapshot edited: ESC in a file": ("files", "/etc/profile.d/blackwell-gpu-node-cuda.sh",
                                       "\x1b]0;owned\x07export CUDA_HOME=/a\n\x1b[2J"),
    "snapshot edited: venv.target /": ("venv", "target", "/"),
    "snapshot edited: cuda.target /root": ("cuda", "target", "/root"),
}


@pytest.mark.parametrize("name", sorted(EDITS))
def test_a_root_snapshot_edited_with_hostile_values_is_refused_and_nothing_moves(hostile, name):
    case = hostile(MODULE, name)
    venv, args = setting(case)
    snapshot = recorded_snapshot(case, args)
    section, key, value = EDITS[name]
    snapshot[section][key] = value
    path = case.private / "state" / "snapshots" / "pre-upgrade.json"
    # Sealed again, as whoever edits root's file can: the values themselves must be refused.
    del snapshot["sha256"]
    snapshot["sha256"] = hashlib.sha256((json.dumps(snapshot, indent=2, sort_keys=True) + "\n").encode()).hexdigest()
    path.write_text(json.dumps(snapshot))
    os.chmod(str(path), 0o600)
    restored = case.module(MODULE, dict(args, state="restored"))
    case.check(restored, "refused", needle=section)
    if os.readlink(str(venv.stable)) != venv.path.name:
        case.problems.append("the stable link was moved to %s" % os.readlink(str(venv.stable)))
    if "\x1b" in restored.stdout:
        case.problems.append("the result carries an ESC character")
    case.finish()
