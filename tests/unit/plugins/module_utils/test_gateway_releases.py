"""_gateway/releases.py: the gateway releases the role ships (each a requirements file with its whole closure, every
pin with its sha256), the one a stack profile names, and what differs between sglang-router and smg."""
import re
from pathlib import Path

import pytest

from ansible_collections.blackwell.gpu_node.plugins.module_utils._gateway import releases

FILES = Path(__file__).resolve().parents[4] / "roles" / "gateway" / "files"
PROFILE = {"name": "sglang-0.5.17-cu130", "gateway": {"package": "smg", "version": "1.13.0"}}
FLEET = [{"name": "gpu01", "url": "http://10.0.0.11:30000", "api_key": "client-key"},
         {"name": "gpu02", "url": "http://10.0.0.12:30000", "api_key": None},
         {"name": "gpu03", "url": "http://10.0.0.13:30000", "api_key": "own-key"}]


def test_the_role_ships_a_requirements_file_for_each_release_and_no_other():
    shipped = sorted(path.name for path in FILES.glob("requirements*.txt"))
    assert shipped == sorted(releases.requirements_file(*release.split()) for release in releases.shipped())
    assert releases.shipped() == ["sglang-router 0.3.2", "smg 1.13.0"]


@pytest.mark.parametrize("release", releases.shipped())
def test_each_requirements_file_pins_its_gateway_and_every_package_with_its_hashes(release):
    package, version = release.split()
    text = (FILES / releases.requirements_file(package, version)).read_text()
    requirements = re.split(r"(?m)^(?=[A-Za-z])", re.sub(r"(?m)^#.*\n", "", text))
    pins = [requirement.split(" ", 1)[0] for requirement in requirements if requirement]
    assert "%s==%s" % (package, version) in pins
    for requirement in filter(None, requirements):
        assert re.fullmatch(r"[A-Za-z0-9][\w.-]*==[\w.]+ \\\n( {4}--hash=sha256:[0-9a-f]{64}( \\\n|\n))+",
                            requirement), requirement
    assert releases.pinned(text) == sorted(re.sub(r"[-_.]+", "-", pin.split("==")[0]).lower() for pin in pins)
    # The oldest Python the table gives is the one the file's words say its pins need.
    assert "Python %s or newer" % releases.GATEWAYS[package]["versions"][version] in text


def test_the_profiles_release_gives_its_requirements_file_and_python():
    assert releases.release(PROFILE) == {"package": "smg", "version": "1.13.0",
                                         "requirements": "requirements-smg-1.13.0.txt", "python": "3.10", "problems": []}
    router = releases.release({"name": "cu130", "gateway": {"package": "sglang-router", "version": "0.3.2"}})
    assert (router["requirements"], router["python"]) == ("requirements-sglang-router-0.3.2.txt", "3.11")


@pytest.mark.parametrize("gateway", [{"package": "smg", "version": "1.12.0"},
                                     {"package": "sglang-router", "version": "1.13.0"},
                                     {"package": "nginx", "version": "1.0"}, {}])
def test_a_release_the_role_ships_no_requirements_for_is_refused_naming_the_profiles_fields(gateway):
    found = releases.release(dict(PROFILE, gateway=gateway))
    assert found["requirements"] is None and found["python"] is None and len(found["problems"]) == 1
    assert found["problems"][0].startswith("stack profile sglang-0.5.17-cu130 names the gateway %s %s (its "
                                           "gateway.package and gateway.version, in stack_profiles.sglang-0.5.17-cu130 "
                                           "or stack_profiles_custom.sglang-0.5.17-cu130)"
                                           % (gateway.get("package"), gateway.get("version")))
    assert found["problems"][0].endswith("set them to one of sglang-router 0.3.2, smg 1.13.0")


def test_smg_with_a_client_key_refuses_a_worker_whose_own_key_is_another():
    # smg hands the client's Authorization to the worker: a worker with another key would refuse every request.
    problems = releases.release(PROFILE, "client-key", FLEET)["problems"]
    assert len(problems) == 1 and problems[0].startswith("host gpu03: its sglang_server_api_key is not gateway_api_key")
    assert "own-key" not in problems[0] and "client-key" not in problems[0]
    assert releases.release(PROFILE, None, FLEET)["problems"] == []


def test_sglang_router_sends_each_worker_its_own_key_whatever_the_client_key():
    profile = {"name": "cu130", "gateway": {"package": "sglang-router", "version": "0.3.2"}}
    assert releases.release(profile, "client-key", FLEET)["problems"] == []


def test_each_gateway_differs_in_its_module_title_labels_update_and_draining():
    router, smg = releases.gateway("sglang-router"), releases.gateway("smg")
    assert (router["module"], router["title"], router["labels"], router["update"], router["draining"]) == (
        "sglang_router.launch_router", "sglang::router", "metadata", "PUT", None)
    assert (smg["module"], smg["title"], smg["labels"], smg["update"], smg["draining"]) == (
        "smg.launch_router", "smg::router", "labels", "PATCH", "draining")
    assert releases.titles() == ("sglang::router", "smg::router")
    assert set(router["policies"]) < set(smg["policies"])
    assert "power_of_two" not in router["policies"] + smg["policies"]


def test_what_another_release_left_in_the_virtualenv_is_named_for_removal():
    text = (FILES / "requirements-smg-1.13.0.txt").read_text()
    names = ("smg", "grpcio", "PyYAML", "typing_extensions", "pip", "setuptools", "sglang-router", "fastapi",
             "Setproctitle")
    installed = [{"name": name, "version": "1"} for name in names]
    assert releases.leftovers(installed, text) == ["fastapi", "sglang-router"]
    assert releases.leftovers(installed[:5], text) == []
