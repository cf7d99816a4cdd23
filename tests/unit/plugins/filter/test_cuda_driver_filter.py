"""The cuda_driver filters: the driver core's functions as the cuda role calls them, from command outputs."""

from ansible_collections.blackwell.gpu_node.plugins.filter.cuda_driver import FilterModule
from ansible_collections.blackwell.gpu_node.plugins.module_utils._cuda import driver as _cuda_driver

FILTERS = FilterModule().filters()


def test_the_filters_are_registered():
    assert sorted(FILTERS) == ["cuda_debian_mirror_problems", "cuda_driver_module_state", "cuda_driver_plan"]
    assert FILTERS["cuda_debian_mirror_problems"] is _cuda_driver.debian_mirror_problems
    gpu = dict(state="ok", kernel_module="open", kernel_module_version="580.95.05", kernel_module_installed_version=None)
    assert FILTERS["cuda_driver_module_state"]("580.95.05-1", gpu) == _cuda_driver.module_state("580.95.05-1", gpu)


def test_the_plan_reads_dpkg_query_and_apt_cache_madison_and_takes_the_branch_as_text():
    dpkg = "nvidia-driver-pinning-570\t570-5\tii \nnvidia-open\t570.195.03-1\tii \n"
    madison = ("nvidia-driver-pinning-580 |      580-5 | file:/srv/cuda  Packages\n"
               "nvidia-open | 580.95.05-1 | file:/srv/cuda  Packages\n")
    assert FILTERS["cuda_driver_plan"]("580", ("nvidia-open",), dpkg, madison) == dict(
        problems=[], purge=["nvidia-driver-pinning-570"], pin=["nvidia-driver-pinning-580"],
        install=["nvidia-open=580.95.05-1"], change=True, versions={"nvidia-open": ["570.195.03-1", "580.95.05-1"]})
