"""What the ml_stack role says about the virtualenv, rendered from its vars and tasks as Jinja2 sees them."""
from pathlib import Path

import jinja2
import pytest
import yaml
from ansible.plugins.filter.core import FilterModule

ROOT = Path(__file__).resolve().parents[3]
VARS = yaml.safe_load((ROOT / "roles" / "ml_stack" / "vars" / "main.yml").read_text())
TASKS = yaml.safe_load((ROOT / "roles" / "ml_stack" / "tasks" / "main.yml").read_text())
REPORT = dict(venv_path="/opt/ml-env", venv_dir="/opt/ml-env.cu130-4d2bc837", active=True, build_reasons=[],
              repaired=[], built=False, versions={"torch": "2.9.1+cu130", "sglang": "0.5.9"}, torch_cuda="13.0", notes=[])


def render(text, **variables):
    environment = jinja2.Environment()
    environment.filters.update(FilterModule().filters())
    return environment.from_string(text).render(**variables)


def said(dry_run=False, **report):
    return render(VARS["__ml_stack_said"], ml_stack_report=dict(REPORT, **report), __ml_stack_dry_run=dry_run)


def converged_message(keep, **report):
    task = next(task for task in TASKS if task["name"] == "Say what the virtualenv holds")
    return render(task["ansible.builtin.debug"]["msg"], __ml_stack_said=said(**report), ml_stack_activate=True,
                  ml_stack_keep=keep, __ml_stack_state={"kept": ["/opt/ml-env.cu128-0a1b2c3d"]})


def test_the_virtualenv_is_said_in_one_sentence_without_trailing_blanks():
    assert said() == ("/opt/ml-env -> ml-env.cu130-4d2bc837 (exactly installed already; no index asked): "
                      "torch 2.9.1+cu130, sglang 0.5.9; torch.version.cuda 13.0.")


def test_a_repair_without_a_build_says_what_it_repaired_not_exactly_installed():
    repaired = ["pip.conf", "closed 2 entries to their group and others"]
    assert said(repaired=repaired).startswith(
        "/opt/ml-env -> ml-env.cu130-4d2bc837 (installed already; no index asked; repaired: pip.conf, closed 2 "
        "entries to their group and others): torch 2.9.1+cu130")
    assert "(installed already; no index asked; would repair: pip.conf, " in said(dry_run=True, repaired=repaired)


def test_notes_follow_after_one_blank():
    assert said(notes=["pip check: a.", "b."]).endswith("torch.version.cuda 13.0. pip check: a. b.")


@pytest.mark.parametrize("keep,ending", [
    (None, "torch.version.cuda 13.0."),
    (2, "torch.version.cuda 13.0. Old virtualenvs kept (2 at most): /opt/ml-env.cu128-0a1b2c3d; removed: none."),
])
def test_the_converged_run_says_the_same_and_what_it_kept(keep, ending):
    assert converged_message(keep).endswith(ending)
    assert converged_message(keep) == converged_message(keep).strip()
