"""The gateway role's launcher (files/gateway_launch.py): it starts the gateway module its command line names
(sglang-router's or smg's, the same two functions in each), with the keys of the secrets file added to the gateway's
own arguments, never its command line. A stand-in module takes the gateway's place."""
import importlib.util
import json
import sys
import types
from pathlib import Path

import pytest

LAUNCHER = Path(__file__).resolve().parents[3] / "roles" / "gateway" / "files" / "gateway_launch.py"


@pytest.fixture
def launcher(monkeypatch):
    spec = importlib.util.spec_from_file_location("gateway_launch", str(LAUNCHER))
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    # The parent's side of the fork: the registering child is not made.
    monkeypatch.setattr(loaded.os, "fork", lambda: 1)
    return loaded


def stand_in(monkeypatch, name):
    """A module called name with launch_router() and parse_router_args(), noting what each was given."""
    seen = {}
    module = types.ModuleType(name)
    module.parse_router_args = lambda arguments: seen.setdefault("parsed", list(arguments))
    module.launch_router = lambda parsed: seen.setdefault("launched", parsed)
    monkeypatch.setitem(sys.modules, name, module)
    return seen


def files(tmp_path):
    (tmp_path / "secrets.json").write_text(json.dumps({"admin_key": "adm", "api_key": "cli"}))
    return ["--secrets", str(tmp_path / "secrets.json"), "--workers", str(tmp_path / "absent.json")]


@pytest.mark.parametrize("module", ["smg.launch_router", "sglang_router.launch_router"])
def test_the_module_named_is_started_with_the_keys_added_to_its_arguments(launcher, monkeypatch, tmp_path, module):
    seen = stand_in(monkeypatch, module)
    assert launcher.main(files(tmp_path) + ["--gateway-module", module, "--", "--port", "30080"]) == 0
    assert seen["parsed"] == ["--port", "30080", "--control-plane-api-keys", "blackwell-gpu-node:ansible:admin:adm",
                              "--api-key", "cli"]
    assert seen["launched"] == seen["parsed"]


def test_a_command_line_without_the_module_starts_sglang_router(launcher, monkeypatch, tmp_path):
    seen = stand_in(monkeypatch, "sglang_router.launch_router")
    stand_in(monkeypatch, "smg.launch_router")
    launcher.main(files(tmp_path) + ["--", "--port", "30080"])
    assert seen["parsed"][:2] == ["--port", "30080"]
