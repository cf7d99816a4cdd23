"""plugins/modules/node_snapshot.py: the entrypoint a restored snapshot's server was started with, which the upgrade's
rollback starts the old release with (the target profile may name the other)."""
import pytest

from ansible_collections.blackwell.gpu_node.plugins.modules.node_snapshot import server_entrypoint

PYTHON = "/home/sglang/ml-env/bin/python"


@pytest.mark.parametrize("argv, expected", [
    ([PYTHON, "-m", "sglang.launch_server", "--model-path", "/srv/m"], "launch_server"),
    ([PYTHON, "/home/sglang/ml-env/bin/sglang", "serve", "--model-path", "/srv/m"], "serve"),
    # Another virtualenv's script is not this interpreter's serve.
    ([PYTHON, "/opt/other/bin/sglang", "serve"], None),
    ([PYTHON, "-m", "sglang.launch_serverx"], None),
    ([PYTHON], None),
    ([], None),
])
def test_the_entrypoint_is_read_from_the_recorded_command_line(argv, expected):
    assert server_entrypoint({"server": {"argv": argv, "env_digest": "d"}}) == expected


@pytest.mark.parametrize("snapshot", [None, {}, {"server": None}, {"server": {"problem": "no state file"}},
                                      {"server": {"argv": "python -m sglang.launch_server"}}])
def test_a_snapshot_without_a_command_line_names_no_entrypoint(snapshot):
    assert server_entrypoint(snapshot) is None
