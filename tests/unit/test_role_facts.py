"""What the roles publish and pass on keeps its types on every supported ansible-core.

Before 2.19 a template renders each value of a mapping to a string (a null to "", JSON text back into a mapping);
2.19 keeps native types. These render the roles' own templates with the Templar of the ansible-core that runs the
unit tests, which `make molecule` also runs on the older cores (tests/run_scenarios.py --core).
"""
import json
import re
from pathlib import Path

import ansible.template
import pytest
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

from ansible_collections.blackwell.gpu_node.plugins.module_utils._stack.ml_stack import file_groups, managed_files

ROLES = Path(__file__).resolve().parents[2] / "roles"
# ansible-core 2.19 renders only trusted templates, which a playbook's own files are; older cores have no trust.
TRUST = getattr(ansible.template, "trust_as_template", lambda text: text)


def trusted(value):
    if isinstance(value, str):
        return TRUST(value)
    if isinstance(value, dict):
        return dict((key, trusted(item)) for key, item in value.items())
    if isinstance(value, list):
        return [trusted(item) for item in value]
    return value


def render(value, variables):
    loader = DataLoader()
    return Templar(loader=loader, variables=variables).template(trusted(value))


def task_file(path):
    return DataLoader().load_from_file(str(ROLES / path))


def named(tasks, name):
    return next(task for task in tasks if task["name"] == name)


CUDA = dict(cuda_home="/usr/local/cuda-13.0", cuda_toolkit_package="cuda-toolkit-13-0", cuda_toolkit_version="13.0.1-1",
            cuda_hold=True, cuda_register=True, cuda_driver_install=False, __cuda_driver_skipped=False,
            cuda_driver_reboot=False,
            __cuda_state={"linked": {"libcudart.so.13": "/usr/local/cuda-13.0/lib64"}, "converged": True})


def cuda_result(**variables):
    task = named(task_file("cuda/tasks/report.yml"), "Publish what the role did")
    return render(task["ansible.builtin.set_fact"]["cuda_result"], dict(CUDA, **variables))


def test_cuda_result_of_an_adopted_toolkit_names_no_package_with_a_null():
    result = cuda_result(__cuda_adopted=True)
    assert result["toolkit"] is None
    assert result["adopted"] is True and result["held"] is False and result["registered"] is True
    assert result["stale_entries"] == [] and result["driver_versions"] == {}
    assert result["linked"] == {"libcudart.so.13": "/usr/local/cuda-13.0/lib64"}


def test_cuda_result_of_an_installed_toolkit_names_its_package_and_version():
    result = cuda_result(__cuda_adopted=False)
    assert result["toolkit"] == "cuda-toolkit-13-0=13.0.1-1" and result["held"] is True


ML_STACK = dict(
    __ml_stack_plan={"venv_path": "/opt/ml-env", "venv_dir": "/opt/ml-env.cu130-1", "profile": "cu130",
                     "versions": {"torch": "2.9.1+cu130"}, "files": {"marker": "/opt/ml-env.cu130-1/.complete",
                                                                     "pip_check": "/opt/ml-env.cu130-1/.pip-check",
                                                                     "constraints": "/opt/ml-env.cu130-1/pins.txt",
                                                                     "pip_conf": "/opt/ml-env.cu130-1/pip.conf"},
                     "marker_text": json.dumps({"profile": "cu130", "versions": {"torch": "2.9.1+cu130"}}, indent=4)
                     + "\n",
                     "constraints": "torch===2.9.1+cu130\n",
                     "pip_conf": "[global]\nconstraint = /opt/ml-env.cu130-1/pins.txt\n"},
    __ml_stack_build=True, __ml_stack_dry_run=True, ml_stack_activate=True, __ml_stack_build_reasons=["new"],
    __ml_stack_torch={}, __ml_stack_owner="sglang",
)
ML_STACK["__ml_stack_plan"]["pins"] = managed_files(ML_STACK["__ml_stack_plan"])
ML_STACK["__ml_stack_verdict"] = {"explanation": "", "deliberate": [], "notes": [],
                                  "files": managed_files(ML_STACK["__ml_stack_plan"], "")}


def test_ml_stack_report_of_a_dry_run_has_a_null_torch_cuda():
    task = named(task_file("ml_stack/tasks/activate.yml"), "Report the virtualenv")
    report = render(task["ansible.builtin.set_fact"]["ml_stack_report"], ML_STACK)
    assert report["torch_cuda"] is None
    assert report["built"] is False and report["active"] is True and report["build_reasons"] == ["new"]


def test_ml_stack_report_names_what_was_repaired_in_every_directory_of_the_virtualenv():
    task = named(task_file("ml_stack/tasks/activate.yml"), "Report the virtualenv")
    files = {"results": [{"written": ["adopted.pth"], "write_cleared_count": 0},
                         {"written": ["pip.conf"], "write_cleared_count": 2}]}
    variables = dict(ML_STACK, __ml_stack_build=False, __ml_stack_dry_run=False, __ml_stack_files=files,
                     **trusted(task["vars"]))
    report = render(task["ansible.builtin.set_fact"]["ml_stack_report"], variables)
    assert report["repaired"] == ["adopted.pth", "pip.conf", "closed 2 entries to their group and others"]
    skipped = dict(variables, __ml_stack_files={"results": [{"skipped": True}]})
    assert render(task["ansible.builtin.set_fact"]["ml_stack_report"], skipped)["repaired"] == []


ACTIVATE = ("Ensure the virtualenv holds the pins, explains the pip check lines the profile causes on purpose, and "
            "is marked complete")
BUILD = "Build or repair the profile's virtualenv; a new one that fails is removed"
PIN_BEFORE_PIP = "Ensure every pip run in the virtualenv honours the profile's pins (constraints file, pip.conf)"


def venv_files(path, name, block=None, variables=None):
    """What a venv_files task of the ml_stack role (in the block named block) is given for each item of its loop,
    rendered with the role's vars, the task's own and the item: [{path, files, clear_group_other_write}]."""
    tasks = task_file("ml_stack/tasks/" + path)
    task = named(named(tasks, block)["block"] if block else tasks, name)
    variables = dict(ML_STACK if variables is None else variables, **trusted(task.get("vars", {})))
    # The collection's filter, which this Templar does not load, applied to what the loop gives it.
    grouped = re.fullmatch(r"\{\{ (.+) \| blackwell\.gpu_node\.ml_stack_file_groups \}\}", task["loop"])
    given = []
    for item in file_groups(render("{{ %s }}" % grouped.group(1), variables)):
        arguments = render(task["blackwell.gpu_node.venv_files"], dict(variables, **{task["loop_control"]["loop_var"]: item}))
        given.append({"path": arguments["path"], "files": arguments["files"],
                      "clear_group_other_write": arguments.get("clear_group_other_write", False)})
    return given


PINS = [{"name": "pins.txt", "content": "torch===2.9.1+cu130\n", "root": True},
        {"name": "pip.conf", "content": "[global]\nconstraint = /opt/ml-env.cu130-1/pins.txt\n", "root": True}]
# A virtualenv on an adopted torch keeps its .pth file in its site-packages, beside the pins.
PTH = {"name": "lib/python3.11/site-packages/adopted.pth", "content": "/opt/torch/lib/python3.11/site-packages\n",
       "root": True}
ADOPTED = dict(ML_STACK, __ml_stack_plan=dict(ML_STACK["__ml_stack_plan"], pins=PINS + [PTH]),
               __ml_stack_verdict=dict(ML_STACK["__ml_stack_verdict"],
                                       files=PINS + [PTH] + ML_STACK["__ml_stack_verdict"]["files"][2:]))


def test_the_completion_marker_is_written_as_the_json_text_it_is_compared_with():
    for variables in (ML_STACK, ADOPTED):
        files = venv_files("activate.yml", ACTIVATE, variables=variables)[-1]["files"]
        assert files[-1] == {"name": ".complete", "content": ML_STACK["__ml_stack_plan"]["marker_text"], "root": False}


def test_every_run_past_the_check_writes_the_pins_that_a_build_writes_before_pip():
    # activate.yml runs whether the run builds or not; install.yml's block only for a build.
    assert [given["files"] for given in venv_files("install.yml", PIN_BEFORE_PIP, BUILD)] == [PINS]
    assert venv_files("activate.yml", ACTIVATE)[0]["files"][:2] == PINS


def test_the_pth_file_of_an_adopted_torch_goes_into_the_virtualenvs_site_packages_before_pip_and_on_every_run():
    site_packages = {"path": "/opt/ml-env.cu130-1/lib/python3.11/site-packages",
                     "files": [dict(PTH, name="adopted.pth")], "clear_group_other_write": False}
    assert venv_files("install.yml", PIN_BEFORE_PIP, BUILD, ADOPTED) == [
        site_packages, {"path": "/opt/ml-env.cu130-1", "files": PINS, "clear_group_other_write": False}]
    written = venv_files("activate.yml", ACTIVATE, variables=ADOPTED)
    assert [given["path"] for given in written] == [site_packages["path"], "/opt/ml-env.cu130-1"]
    assert written[0]["files"] == site_packages["files"] and written[1]["files"][:2] == PINS


def test_every_run_past_the_check_closes_the_virtualenv_to_its_group_and_others():
    # The converged check makes an entry that a group or others can write a reason; this task removes it, in one
    # walk of the whole virtualenv.
    for variables in (ML_STACK, ADOPTED):
        cleared = [given["clear_group_other_write"] for given in venv_files("activate.yml", ACTIVATE, variables=variables)]
        assert cleared[-1] is True and not any(cleared[:-1])


@pytest.mark.parametrize("entrypoint", ["launch_server", "serve"])
def test_the_server_starts_the_way_the_stack_profile_says(entrypoint):
    value = DataLoader().load_from_file(str(ROLES / "sglang_server" / "defaults" / "main.yml"))["sglang_server_entrypoint"]
    assert render(value, {"stack_selected": {"python": {"sglang": {"entrypoint": entrypoint}}}}) == entrypoint
    passed = named(task_file("sglang_server/tasks/run.yml"), "Ensure the server is {{ sglang_server_state }}")
    assert render(passed["blackwell.gpu_node.sglang_server"]["entrypoint"],
                  {"sglang_server_entrypoint": entrypoint, "sglang_server_state": "started", "omit": "OMIT"}) == entrypoint


SPECULATIVE = dict(sglang_server_speculative_algorithm="EAGLE3", sglang_server_speculative_num_steps=3,
                   sglang_server_speculative_eagle_topk=1, sglang_server_speculative_num_draft_tokens=4)


def speculative(draft):
    value = DataLoader().load_from_file(str(ROLES / "sglang_server" / "vars" / "main.yml"))["__sglang_server_speculative"]
    return render(value, dict(SPECULATIVE, sglang_server_speculative_draft_model_path=draft))


def test_speculative_settings_are_empty_without_a_draft_model_and_typed_with_one():
    assert speculative(None) == {}
    assert speculative("/srv/models/draft") == {
        "algorithm": "EAGLE3", "draft_model_path": "/srv/models/draft", "num_steps": 3, "eagle_topk": 1,
        "num_draft_tokens": 4}
