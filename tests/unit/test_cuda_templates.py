"""The cuda role's profile script keeps cuda_home one shell word: sourced, it sets CUDA_HOME and runs nothing."""
import subprocess
from pathlib import Path

import jinja2
import pytest
from ansible.plugins.filter.core import FilterModule

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = ROOT / "roles" / "cuda" / "templates"


def rendered(name, cuda_home, ansible_managed="Ansible managed"):
    environment = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), keep_trailing_newline=True)
    environment.filters.update(FilterModule().filters())
    return environment.get_template(name).render(
        ansible_managed=ansible_managed, cuda_home=cuda_home, stack_selected={"cuda": {"series": "13.0"}})


@pytest.mark.parametrize("cuda_home", ["/usr/local/cuda-13.0", "/opt/cuda-$(touch ran)", "/opt/cuda;touch ran",
                                       "/opt/it's-cuda`touch ran`"])
def test_sourcing_the_profile_sets_cuda_home_as_it_is_and_runs_nothing(tmp_path, cuda_home):
    script = tmp_path / "cuda.sh"
    script.write_text(rendered("profile.sh.j2", cuda_home))
    shown = subprocess.run(["sh", "-c", '. ./cuda.sh && printf %s "$CUDA_HOME"'], cwd=str(tmp_path),
                           capture_output=True, text=True, check=True, env={"PATH": "/usr/bin:/bin"})
    assert shown.stdout == cuda_home
    assert not (tmp_path / "ran").exists()


def test_nvidias_cuda_home_is_written_as_before():
    assert "\nexport CUDA_HOME=/usr/local/cuda-13.0\n" in rendered("profile.sh.j2", "/usr/local/cuda-13.0")


@pytest.mark.parametrize("name", ["ld.so.conf.j2", "profile.sh.j2"])
def test_the_text_is_the_same_whatever_the_controllers_ansible_managed(name):
    # The upgrade's switch writes these, and the next site compares them: a controller's own ansible_managed (its
    # host, the template's time) would make site write them again. The first line is what the default gives, so
    # that a file written with the default stays as it is.
    shown = rendered(name, "/usr/local/cuda-13.0")
    assert rendered(name, "/usr/local/cuda-13.0", "Ansible managed: modified on 2026-12-08 by root on awx-job-7f3c") == shown
    assert shown.startswith("# Ansible managed\n# CUDA 13.0 for ")
