"""The cuda_fabric filters: the fabric core's functions as the cuda and preflight roles call them, from command
outputs (dpkg-query's and apt-cache madison's text)."""

from ansible_collections.blackwell.gpu_node.plugins.filter.cuda_fabric import FilterModule

FILTERS = FilterModule().filters()
HGX_H200 = dict(state="ok", driver_version="580.95.05", kernel_module_version="580.95.05", nvswitch=True,
                nvswitch_devices=["0000:05:00.0"], nvlink_generation=4, fabric=dict(state="Not Started", status=None))
DPKG = "nvidia-fabricmanager\t580.82.07-1\tii \n"
MADISON = ("nvidia-fabricmanager | 580.95.05-1 | file:/srv/cuda  Packages\n"
           "libnvidia-nscq | 580.95.05-1 | file:/srv/cuda  Packages\n")


def test_the_filters_are_registered():
    assert sorted(FILTERS) == ["cuda_fabric_decision", "cuda_fabric_packages", "cuda_fabric_plan"]


def test_the_decision_reads_dpkg_query():
    assert FILTERS["cuda_fabric_decision"]("auto", dict(HGX_H200, nvswitch_devices=[],
                                                        fabric=dict(state="Completed", status="Success")), DPKG) == \
        dict(wanted=True, reason="Fabric Manager is installed", problems=[])


def test_the_plan_reads_dpkg_query_and_apt_cache_madison():
    assert FILTERS["cuda_fabric_plan"]("auto", HGX_H200, DPKG, MADISON) == dict(
        wanted=True, reason="the nvidia-nvswitch driver holds 1 NVSwitch(es)", problems=[],
        install=["nvidia-fabricmanager=580.95.05-1", "libnvidia-nscq=580.95.05-1"],
        service="nvidia-fabricmanager.service", change=True,
        versions={"nvidia-fabricmanager": ["580.82.07-1", "580.95.05-1"], "libnvidia-nscq": [None, "580.95.05-1"]})


def test_the_package_names_take_the_branch_as_text_or_a_number():
    expected = dict(installed=["nvidia-fabricmanager*", "libnvidia-nscq*", "nvlsm"],
                    available=["nvidia-fabricmanager", "nvidia-fabricmanager-580", "libnvidia-nscq",
                               "libnvidia-nscq-580", "nvlsm"])
    assert FILTERS["cuda_fabric_packages"]("580") == expected
    assert FILTERS["cuda_fabric_packages"](580) == expected
