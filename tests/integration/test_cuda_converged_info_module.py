"""The cuda role's check on this machine, which has no CUDA: it gathers the facts the role reads,
changes nothing, and says why the role must run instead of failing on what it cannot observe."""
from conftest import run_module

ARGS = dict(
    repo_base_url="file:///srv/no-such-mirror/repos/",
    repo_architectures={"x86_64": "x86_64", "aarch64": "sbsa"},
    supported_os=["debian12"],
    supported_architectures=["x86_64", "aarch64"],
    cuda_home="/nonexistent/cuda-13.0",
    cuda_series="13.0",
    driver_install=False,
    driver_branch_min=580,
    gpu={"state": "no_driver"},
    adopt_existing=True,
    toolkit_package="cuda-toolkit-13-0",
    toolkit_version="13.0.1-1",
    hold=True,
    key_fingerprint="55E96F6409EC06F59ECE4979B8F98BBCCA0BB0E0",
    revoked_key_ids=["F60F4B3D7FA2AF80"],
    keyring="/nonexistent/cuda-archive-keyring.gpg",
    exported_key="/nonexistent/cuda-repository-key.gpg",
    state_dir="/nonexistent/state",
    registered=True,
    registration_files={"/nonexistent/000-cuda.conf": "/nonexistent/cuda-13.0/lib64\n"},
    linked_script="import json; print(json.dumps({'cache': {}}))",
)


def test_it_gathers_the_facts_the_role_reads_and_says_why_the_role_must_run():
    result = run_module("cuda_converged_info", check_mode=True, **ARGS)
    assert not result.get("failed"), result
    assert result["changed"] is False and result["converged"] is False
    facts = result["ansible_facts"]
    for name in ("ansible_distribution", "ansible_architecture", "ansible_python", "ansible_service_mgr",
                 "ansible_virtualization_type"):
        assert name in facts, sorted(facts)
    assert result["platform"]["architecture"] == facts["ansible_architecture"]
    assert result["repository"]["url"].startswith("file:///srv/no-such-mirror/repos/")
    listed = [thing for thing in result["managed"] if thing["kind"] == "file" and thing["part"] == "repository"]
    assert [thing.get("content") for thing in listed] == [
        None, "deb [signed-by=/nonexistent/cuda-archive-keyring.gpg] %s/ /\n" % result["repository"]["url"]]
    assert listed[0]["source"] == "/nonexistent/cuda-repository-key.gpg"
    assert result["adopted"] is False
    assert result["linked"] == {"cache": {}}
    reasons = result["reasons"]
    assert "/nonexistent/000-cuda.conf is missing" in reasons
    assert "the linker's cache lacks libcudart.so.13" in reasons
    assert "gpg could not read /nonexistent/cuda-archive-keyring.gpg" in reasons
