"""The cuda role's converged check: every input and every observation it depends on flips it, alone, with a
reason that names it; what the role does not read leaves it converged."""
import copy
import json
import os

import pytest

from ansible_collections.blackwell.gpu_node.plugins.module_utils._cuda.state import (
    adopted,
    managed,
    observed_file,
    observe_host,
    platform_settings,
    unconverged_reasons,
)

PINNED = "55E96F6409EC06F59ECE4979B8F98BBCCA0BB0E0"
KEY_COLONS = "pub:-:4096:1:B8F98BBCCA0BB0E0:1796120257:::-:::scSC::::::23::0:\nfpr:::::::::%s:\n" % PINNED
KEY_BYTES = b"\x99\x02\rpinned key"
HOME = "/usr/local/cuda-13.0"
LIST = "/etc/apt/sources.list.d/cuda-debian12-x86_64.list"
LINKER_CONF = "/etc/ld.so.conf.d/000-blackwell-gpu-node-cuda.conf"
PROFILE = "/etc/profile.d/blackwell-gpu-node-cuda.sh"
KEYRING = "/usr/share/keyrings/cuda-archive-keyring.gpg"
EXPORTED = "/var/lib/blackwell-gpu-node/cuda/cuda-repository-key.gpg"
STATE_DIR = "/var/lib/blackwell-gpu-node/cuda"
USR_LOCAL_CUDA = "/usr/local/cuda"
FACTS = {"distribution": "Debian", "distribution_version": "12.8", "architecture": "x86_64"}


def base_settings():
    settings = dict(
        repo_base_url="file:///srv/repos/",
        repo_architectures={"x86_64": "x86_64", "aarch64": "sbsa"},
        supported_os=["debian12", "ubuntu2404"],
        supported_architectures=["x86_64"],
        cuda_home=HOME,
        cuda_series="13.0",
        driver_install=False,
        driver_branch_min=580,
        gpu={"state": "ok", "driver_version": "580.95.05"},
        adopt_existing=True,
        toolkit_package="cuda-toolkit-13-0",
        toolkit_version="13.0.1-1",
        hold=True,
        key_fingerprint=PINNED,
        revoked_key_ids=["F60F4B3D7FA2AF80"],
        keyring=KEYRING,
        exported_key=EXPORTED,
        state_dir="/var/lib/blackwell-gpu-node/cuda",
        registered=True,
        registration_files={LINKER_CONF: "# Ansible managed\n%s/lib64\n" % HOME, PROFILE: "export CUDA_HOME=%s\n" % HOME},
        linked_script="print('{}')",
        linker_conf_dir="/etc/ld.so.conf.d",
    )
    settings.update(platform_settings(settings, FACTS))
    return settings


def regular(data):
    return dict(regular=True, uid=0, mode="0644", data=data)


def base_observed():
    """A host as the role leaves it, for base_settings()."""
    return dict(
        packages={"cuda-toolkit-13-0": ("hold ok installed", "13.0.1-1"), "gpg": ("install ok installed", "2.2"),
                  "ca-certificates": ("install ok installed", "2023")},
        runtime_exists=True,
        available=["13.0.2-1", "13.0.1-1"],
        directories={"/var/lib/blackwell-gpu-node/cuda": "0755"},
        files={
            LIST: regular(b"deb [signed-by=%s] file:///srv/repos/debian12/x86_64/ /\n" % KEYRING.encode()),
            KEYRING: regular(KEY_BYTES),
            EXPORTED: regular(KEY_BYTES),
            LINKER_CONF: regular(("# Ansible managed\n%s/lib64\n" % HOME).encode()),
            PROFILE: regular(("export CUDA_HOME=%s\n" % HOME).encode()),
        },
        keyring_colons=KEY_COLONS,
        apt_key_ids=["648ACFD622F3D138", "0E98404D386FA1D9"],
        alternative=["Name: cuda", "Link: /usr/local/cuda", "Value: " + HOME, "", "Alternative: " + HOME,
                     "Priority: 130"],
        links={"/usr/local/cuda": "/etc/alternatives/cuda"},
        stale_linker_entries=[],
        undecodable_linker_files=[],
        linked={"cache": {"libcudart.so.13": [HOME + "/targets/x86_64-linux/lib/libcudart.so.13.0.96"],
                          "libnvrtc.so.13": [HOME + "/targets/x86_64-linux/lib/libnvrtc.so.13.0.88"]},
                "cudart_version": "13.0", "nvrtc_version": "13.0"},
    )


def reasons_for(settings=None, observed=None):
    return unconverged_reasons(settings or base_settings(), observed or base_observed())


def test_a_host_as_the_role_leaves_it_is_converged():
    assert reasons_for() == []


def test_the_platform_and_the_repository_list_come_from_the_facts():
    settings = base_settings()
    assert (settings["os_id"], settings["architecture"], settings["repo_architecture"]) == ("debian12", "x86_64",
                                                                                            "x86_64")
    assert settings["repository"] == dict(
        url="file:///srv/repos/debian12/x86_64", list_path=LIST,
        list_content="deb [signed-by=%s] file:///srv/repos/debian12/x86_64/ /\n" % KEYRING)
    arm = platform_settings(base_settings(), dict(FACTS, architecture="aarch64"))
    assert arm["repository"]["list_path"] == "/etc/apt/sources.list.d/cuda-debian12-sbsa.list"
    assert platform_settings(base_settings(), dict(FACTS, architecture="riscv64"))["repo_architecture"] == ""


def changed_setting(name, value):
    settings = base_settings()
    settings[name] = value
    return settings


# Each input of the role alone, and a word its reason holds.
SETTING_CHANGES = [
    ("supported_os", ["ubuntu2404"], "not a platform of the stack profile"),
    ("supported_architectures", ["aarch64"], "not a platform of the stack profile"),
    ("repo_architecture", "", "not a platform of the stack profile"),
    ("cuda_home", "usr/local/cuda-13.0", "cuda_home=usr/local/cuda-13.0 is not an absolute path"),
    ("cuda_home", HOME + "\n/tmp", "cuda_home"),
    ("cuda_home", "/opt/cuda-13.0", "/opt/cuda-13.0"),
    ("cuda_series", "13.1", "13.1"),
    ("driver_branch_min", 590, "older than branch 590"),
    ("gpu", None, "the GPU driver was not read"),
    ("gpu", {"state": "ok", "driver_version": "575.51.03"}, "driver 575.51.03 is older than branch 580"),
    ("gpu", {"state": "ok", "driver_version": "unknown"}, "older than branch 580"),
    ("gpu", {"state": "ok", "driver_version": "\u00b2580.1"}, "older than branch 580"),
    ("toolkit_version", "13.0.2-1", "not installed at 13.0.2-1"),
    ("toolkit_version", "13.0.9-1", "cuda-toolkit-13-0=13.0.9-1 is not in the repository's lists"),
    ("hold", False, "selection is hold, cuda_hold is False"),
    ("key_fingerprint", "0123456789ABCDEF0123456789ABCDEF01234567", "cuda_repo_key_fingerprint="),
    ("revoked_key_ids", ["0E98404D386FA1D9"], "apt still trusts revoked key 0E98404D386FA1D9"),
    ("revoked_key_ids", ["386FA1D9"], "apt still trusts revoked key 386FA1D9"),
    ("revoked_key_ids", ["0x0E98404D386FA1D9"], "apt still trusts revoked key 0x0E98404D386FA1D9"),
    ("revoked_key_ids", ["not hex"], "apt still trusts revoked key not hex"),
    ("keyring", "/usr/share/keyrings/other.gpg", "/usr/share/keyrings/other.gpg is missing"),
    ("registration_files", {LINKER_CONF: "# Ansible managed\n/opt/cuda/lib64\n"}, LINKER_CONF + " differs"),
    ("registration_files", {"/etc/profile.d/other.sh": "x"}, "/etc/profile.d/other.sh is missing"),
]


@pytest.mark.parametrize("name, value, said", SETTING_CHANGES)
def test_each_input_alone_makes_the_role_act_naming_it(name, value, said):
    reasons = reasons_for(settings=changed_setting(name, value))
    assert reasons and any(said in reason for reason in reasons), reasons


def test_the_repository_address_reaches_the_check_through_the_list():
    settings = base_settings()
    settings.update(platform_settings(dict(settings, repo_base_url="https://mirror.example/cuda/repos"), FACTS))
    assert reasons_for(settings=settings) == ["%s differs from what the role writes" % LIST]


def test_the_platform_facts_reach_the_check():
    settings = base_settings()
    settings.update(platform_settings(settings, dict(FACTS, distribution_version="13")))
    reasons = reasons_for(settings=settings)
    assert "debian13 on x86_64 is not a platform of the stack profile" in reasons


def test_inputs_the_role_does_not_read_in_that_case_leave_it_converged():
    # The driver's own tasks handle a driver to install; the preflight then does not check the loaded one.
    assert reasons_for(settings=changed_setting("driver_install", True)) == []
    settings = changed_setting("gpu", {"state": "ok", "driver_version": "575.51.03"})
    settings["driver_install"] = True
    assert reasons_for(settings=settings) == []
    # Without a driver there is nothing to compare; the preflight lets it pass.
    assert reasons_for(settings=changed_setting("gpu", {"state": "no_driver"})) == []
    # No revoked key to look for.
    observed = base_observed()
    observed["apt_key_ids"] = None
    assert reasons_for(settings=changed_setting("revoked_key_ids", []), observed=observed) == []
    # Unregistered: the linker's files and resolution are not the role's business.
    observed = base_observed()
    observed["files"].pop(LINKER_CONF)
    observed["linked"] = None
    observed["alternative"] = None
    assert reasons_for(settings=changed_setting("registered", False), observed=observed) == []


def changed_observation(change):
    observed = base_observed()
    change(observed)
    return observed


def set_file(path, **fields):
    return lambda observed: observed["files"][path].update(fields)


# Each way the host can differ from what the role leaves, and a word its reason holds.
HOST_CHANGES = [
    (lambda observed: observed["packages"].pop("gpg"), "gpg is not installed"),
    (lambda observed: observed["packages"].update({"ca-certificates": ("deinstall ok config-files", "1")}),
     "ca-certificates is not installed"),
    (lambda observed: observed["packages"].update({"cuda-toolkit-13-0": ("hold ok installed", "13.0.0-1")}),
     "not installed at 13.0.1-1"),
    (lambda observed: observed["packages"].update({"cuda-toolkit-13-0": ("install ok installed", "13.0.1-1")}),
     "selection is install, cuda_hold is True"),
    (lambda observed: observed.update(available=[]), "not in the repository's lists"),
    (lambda observed: observed["directories"].update({STATE_DIR: "0700"}), "is not a directory with mode 0755"),
    (lambda observed: observed["directories"].update({STATE_DIR: None}), "is not a directory with mode 0755"),
    (set_file(LIST, data=b"deb http://elsewhere/ /\n"), LIST + " differs"),
    (set_file(LIST, mode="0664"), LIST + " is owned by uid 0 with mode 0664"),
    (set_file(LIST, uid=1000), LIST + " is owned by uid 1000"),
    (set_file(LIST, regular=False, data=None), LIST + " is not a regular file"),
    (lambda observed: observed["files"].update({LIST: None}), LIST + " is missing"),
    (set_file(KEYRING, data=b"another key"), KEYRING + " differs"),
    (lambda observed: observed["files"].update({EXPORTED: None}), KEYRING + " differs"),
    (lambda observed: observed.update(keyring_colons=None), "gpg could not read"),
    (lambda observed: observed.update(keyring_colons=KEY_COLONS + KEY_COLONS.replace(PINNED, "A" * 40)),
     "holds other keys"),
    (lambda observed: observed["apt_key_ids"].append("F60F4B3D7FA2AF80"), "apt still trusts revoked key"),
    (lambda observed: observed.update(apt_key_ids=None), "apt-key could not list"),
    (lambda observed: observed["alternative"].remove("Value: " + HOME), "lacks 'Value: %s'" % HOME),
    (lambda observed: observed["alternative"].remove("Alternative: " + HOME), "lacks 'Alternative: %s'" % HOME),
    (lambda observed: observed.update(alternative=None),
     "/usr/local/cuda links to /etc/alternatives/cuda, not to " + HOME),
    (lambda observed: observed.update(alternative=None, links={USR_LOCAL_CUDA: None}), "/usr/local/cuda is not a link (to %s)"
     % HOME),
    # The alternative's Value is its own link's: /usr/local/cuda pointed elsewhere by hand leaves it as it was.
    (lambda observed: observed["links"].update({USR_LOCAL_CUDA: "/usr/local/cuda-12.8"}),
     "/usr/local/cuda links to /usr/local/cuda-12.8, not to /etc/alternatives/cuda"),
    (lambda observed: observed["links"].update({USR_LOCAL_CUDA: HOME}), "/usr/local/cuda links to %s, not to "
     "/etc/alternatives/cuda" % HOME),
    (lambda observed: observed["links"].update({USR_LOCAL_CUDA: None}),
     "/usr/local/cuda is not a link (to /etc/alternatives/cuda)"),
    (set_file(LINKER_CONF, data=b"/opt/other/lib64\n"), LINKER_CONF + " differs"),
    (set_file(PROFILE, mode="0755"), PROFILE + " is owned by uid 0 with mode 0755"),
    (lambda observed: observed["files"].update({PROFILE: None}), PROFILE + " is missing"),
    (lambda observed: observed.update(stale_linker_entries=[
        dict(file="/etc/ld.so.conf.d/cuda-12.conf", entry="/usr/local/cuda-12.8/lib64", major=12)]),
     "/etc/ld.so.conf.d/cuda-12.conf lists /usr/local/cuda-12.8/lib64 (CUDA 12)"),
    (lambda observed: observed.update(stale_linker_entries=None), "/etc/ld.so.conf.d could not be read"),
    (lambda observed: observed.update(undecodable_linker_files=["/etc/ld.so.conf.d/latin1.conf"]),
     "latin1.conf is not UTF-8 text"),
    (lambda observed: observed.update(linked=None), "could not be read"),
    (lambda observed: observed.update(linked={"cache": "?"}), "could not be read"),
    (lambda observed: observed["linked"]["cache"].pop("libnvrtc.so.13"), "the linker's cache lacks libnvrtc.so.13"),
    (lambda observed: observed["linked"]["cache"]["libcudart.so.13"].append("/usr/lib/libcudart.so.13"),
     "libcudart.so.13 resolves outside"),
    (lambda observed: observed["linked"]["cache"].update({"libcudart.so.13": [HOME + "-old/lib64/libcudart.so.13"]}),
     "libcudart.so.13 resolves outside"),
    (lambda observed: observed["linked"].update(cudart_version="not loaded: nope"), "libcudart reports not loaded"),
    (lambda observed: observed["linked"].update(nvrtc_version="12.8"), "libnvrtc reports 12.8, not 13.0"),
]


@pytest.mark.parametrize("change, said", HOST_CHANGES)
def test_each_difference_on_the_host_makes_the_role_act_naming_it(change, said):
    reasons = reasons_for(observed=changed_observation(change))
    assert reasons and any(said in reason for reason in reasons), reasons


def test_a_tool_the_role_installs_keeps_the_selection_its_administrator_gave_it():
    observed = base_observed()
    observed["packages"]["gpg"] = ("deinstall ok installed", "2.2")
    assert reasons_for(observed=observed) == []


def test_without_an_alternative_usr_local_cuda_links_to_cuda_home():
    observed = base_observed()
    observed.update(alternative=None, links={USR_LOCAL_CUDA: HOME})
    assert reasons_for(observed=observed) == []


def test_without_a_cuda_to_adopt_the_toolkit_package_must_be_installed():
    observed = base_observed()
    observed["runtime_exists"] = False
    observed["packages"]["cuda-toolkit-13-0"] = ("hold ok half-configured", "13.0.1-1")
    assert "cuda-toolkit-13-0 is hold ok half-configured at '13.0.1-1', not installed at 13.0.1-1" in reasons_for(
        observed=observed)
    observed["packages"].pop("cuda-toolkit-13-0")
    assert "cuda-toolkit-13-0 is not known to dpkg at '', not installed at 13.0.1-1" in reasons_for(observed=observed)
    settings = changed_setting("toolkit_package", "cuda-toolkit-13-1")
    assert any("cuda-toolkit-13-1" in reason for reason in reasons_for(settings=settings, observed=observed))


def test_an_adopted_cuda_is_not_checked_for_the_repository_or_the_toolkit():
    observed = base_observed()
    observed["packages"] = {}
    observed["available"] = []
    observed["files"] = dict((path, observed["files"][path]) for path in (LINKER_CONF, PROFILE))
    observed["keyring_colons"] = None
    observed["apt_key_ids"] = None
    assert adopted(base_settings(), observed)
    assert reasons_for(observed=observed) == []
    # ... and a CUDA not adopted is.
    assert reasons_for(settings=changed_setting("adopt_existing", False), observed=observed)


@pytest.mark.parametrize("status, expected", [
    (None, True),
    ("unknown ok not-installed", True),
    ("install ok installed", False),
    ("hold ok installed", False),
    ("deinstall ok installed", False),
    ("install ok half-installed", True),
])
def test_adoption_is_for_a_runtime_dpkg_did_not_install_as_the_toolkit(status, expected):
    observed = base_observed()
    if status is None:
        observed["packages"].pop("cuda-toolkit-13-0")
    else:
        observed["packages"]["cuda-toolkit-13-0"] = (status, "13.0.1-1")
    assert adopted(base_settings(), observed) is expected
    assert not adopted(changed_setting("adopt_existing", False), observed)
    observed["runtime_exists"] = False
    assert not adopted(base_settings(), observed)


def declared_names(settings=None, observed=None):
    return [(thing["kind"], thing.get("path", thing.get("name")))
            for thing in managed(settings or base_settings(), observed or base_observed())]


def test_the_role_declares_each_thing_it_keeps_once_in_the_order_its_tasks_keep_them():
    assert declared_names() == [
        ("package", "gpg"), ("package", "ca-certificates"), ("directory", STATE_DIR), ("file", KEYRING),
        ("file", LIST), ("package", "cuda-toolkit-13-0"), ("alternative", "cuda"),
        ("link", USR_LOCAL_CUDA), ("file", LINKER_CONF), ("file", PROFILE)]
    toolkit = managed(base_settings(), base_observed())[5]
    assert (toolkit["version"], toolkit["selection"], toolkit["part"]) == ("13.0.1-1", "hold", "toolkit")
    assert managed(changed_setting("hold", False), base_observed())[5]["selection"] == "install"
    # The keyring is the exported key's copy; the link goes through the alternative where there is one.
    keyring = managed(base_settings(), base_observed())[3]
    assert keyring["source"] == EXPORTED and "content" not in keyring
    assert managed(base_settings(), base_observed())[7]["target"] == "/etc/alternatives/cuda"


def test_what_the_role_declares_follows_adoption_registration_and_the_alternative():
    observed = base_observed()
    observed["alternative"] = None
    assert declared_names(observed=observed)[6:] == [("link", USR_LOCAL_CUDA), ("file", LINKER_CONF),
                                                     ("file", PROFILE)]
    assert managed(base_settings(), observed)[6]["target"] == HOME
    assert [name for kind, name in declared_names(settings=changed_setting("registered", False))] == [
        "gpg", "ca-certificates", STATE_DIR, KEYRING, LIST, "cuda-toolkit-13-0"]
    observed = base_observed()
    observed["packages"].pop("cuda-toolkit-13-0")
    assert declared_names(observed=observed) == [("alternative", "cuda"), ("link", USR_LOCAL_CUDA),
                                                 ("file", LINKER_CONF), ("file", PROFILE)]


# One change behind the role's back for each kind of thing it keeps, as the cuda scenario's drift step makes it.
DRIFTS = dict(
    # Removing the toolkit would leave a CUDA to adopt: its selection changes instead.
    package=lambda observed, thing: observed["packages"].update({thing["name"]: (
        "install ok installed", thing["version"]) if thing.get("selection") == "hold" else ("", "")}),
    directory=lambda observed, thing: observed["directories"].update({thing["path"]: "0700"}),
    file=lambda observed, thing: observed["files"][thing["path"]].update(data=b"edited\n"),
    alternative=lambda observed, thing: observed["alternative"].remove("Value: " + thing["value"]),
    link=lambda observed, thing: observed["links"].update({thing["path"]: "/tmp"}),
)


@pytest.mark.parametrize("index", range(len(managed(base_settings(), base_observed()))))
def test_each_thing_the_role_declares_changed_alone_is_named_and_nothing_else(index):
    thing = managed(base_settings(), base_observed())[index]
    observed = base_observed()
    DRIFTS[thing["kind"]](observed, thing)
    reasons = reasons_for(observed=observed)
    named = thing.get("path", thing.get("name"))
    assert reasons and all(named in reason for reason in reasons), reasons


def test_the_file_state_never_follows_a_link(tmp_path):
    target = tmp_path / "target"
    target.write_text("x")
    target.chmod(0o644)
    link = tmp_path / "link"
    link.symlink_to(target)
    assert observed_file(str(target)) == dict(regular=True, uid=os.getuid(), mode="0644", data=b"x")
    assert observed_file(str(link))["regular"] is False and observed_file(str(link))["data"] is None
    assert observed_file(str(tmp_path / "missing")) is None
    assert observed_file(str(tmp_path))["regular"] is False


class FakeHost:
    """Answers the commands observe_host runs, records them."""

    def __init__(self, answers):
        self.answers = answers
        self.argvs = []

    def __call__(self, argv):
        self.argvs.append(argv)
        return self.answers.get(argv[0], (1, "", "not found"))


def test_observe_host_reads_the_commands_and_files(tmp_path):
    conf_dir = tmp_path / "ld.so.conf.d"
    conf_dir.mkdir()
    (conf_dir / "cuda-12.conf").write_text("/usr/local/cuda-12.8/lib64\n")
    (conf_dir / "latin1.conf").write_bytes(b"# caf\xe9\n")
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    state_dir.chmod(0o755)
    settings = dict(base_settings(), linker_conf_dir=str(conf_dir), state_dir=str(state_dir),
                    cuda_home=str(tmp_path / "cuda"))
    host = FakeHost({
        "dpkg-query": (1, "cuda-toolkit-13-0\thold ok installed\t13.0.1-1\ngpg\tinstall ok installed\t2.2\n"
                          "broken line\n", ""),
        "apt-cache": (0, " cuda-toolkit-13-0 | 13.0.2-1 | file:/srv Packages\n cuda-toolkit-13-0 | 13.0.1-1 | x\n"
                         "N: nothing\n", ""),
        "gpg": (0, KEY_COLONS, ""),
        "apt-key": (0, "tru::1:0:0:0\npub:-:4096:1:f60f4b3d7fa2af80:1:::\nsub:-:4096:1:AAAA:1:::\n", ""),
        "update-alternatives": (2, "", "no alternatives for cuda"),
        "python3": (0, json.dumps({"cache": {}}), ""),
    })
    observed = observe_host(settings, host, "python3")
    assert observed["packages"] == {"cuda-toolkit-13-0": ("hold ok installed", "13.0.1-1"),
                                    "gpg": ("install ok installed", "2.2")}
    assert observed["runtime_exists"] is False
    assert observed["available"] == ["13.0.2-1", "13.0.1-1"]
    assert observed["directories"] == {str(state_dir): "0755"}
    assert observed["keyring_colons"] == KEY_COLONS
    assert observed["apt_key_ids"] == ["F60F4B3D7FA2AF80", "AAAA"]
    assert observed["alternative"] is None
    assert observed["stale_linker_entries"] == [
        dict(file=str(conf_dir / "cuda-12.conf"), entry="/usr/local/cuda-12.8/lib64", major=12)]
    assert observed["undecodable_linker_files"] == [str(conf_dir / "latin1.conf")]
    assert observed["linked"] == {"cache": {}}
    assert host.argvs[-1] == ["python3", "-c", settings["linked_script"], "13"]
    assert sorted(observed["files"]) == sorted([LIST, KEYRING, EXPORTED, LINKER_CONF, PROFILE])
    assert "apt still trusts revoked key F60F4B3D7FA2AF80" in unconverged_reasons(settings, observed)


def test_observe_host_asks_only_what_the_settings_need(tmp_path):
    # No CUDA in cuda_home to adopt, whatever the machine running the test has: the repository's things are declared.
    settings = dict(base_settings(), linker_conf_dir=str(tmp_path / "missing"), revoked_key_ids=[], registered=False,
                    cuda_home=str(tmp_path / "cuda"), state_dir=str(tmp_path / "state"))
    host = FakeHost({"update-alternatives": (0, "Name: cuda\nValue: /x\n", ""), "python3": (0, "not json", "")})
    observed = observe_host(settings, host, "python3")
    assert [argv[0] for argv in host.argvs] == ["dpkg-query", "update-alternatives", "apt-cache", "gpg"]
    assert observed["apt_key_ids"] is None and observed["linked"] is None
    assert observed["alternative"] == ["Name: cuda", "Value: /x"]
    assert observed["stale_linker_entries"] is None
    assert observed["directories"] == {str(tmp_path / "state"): None}
    assert observed["keyring_colons"] is None or isinstance(observed["keyring_colons"], str)


def test_a_linker_report_that_is_not_json_is_unobserved(tmp_path):
    settings = dict(base_settings(), linker_conf_dir=str(tmp_path))
    observed = observe_host(settings, FakeHost({"python3": (0, "not json", "")}), "python3")
    assert observed["linked"] is None
    observed = observe_host(settings, FakeHost({"python3": (1, json.dumps({"cache": {}}), "")}), "python3")
    assert observed["linked"] is None


def test_the_settings_are_not_changed_by_the_check():
    settings = base_settings()
    before = copy.deepcopy(settings)
    reasons_for(settings=settings)
    assert settings == before


def test_a_command_the_host_lacks_is_unobserved_not_a_failure_of_the_module():
    from ansible_collections.blackwell.gpu_node.plugins.modules.cuda_converged_info import runner

    class Module:
        def __init__(self):
            self.argvs = []

        def run_command(self, argv):
            self.argvs.append(argv)
            return 0, "ran", ""

    module = Module()
    run = runner(module)
    assert run(["no-such-command-for-cuda-state", "--query"]) == (127, "", "no-such-command-for-cuda-state: command not found")
    assert run(["true"]) == (0, "ran", "") and module.argvs == [["true"]]


def test_the_file_state_never_blocks_on_a_fifo_nor_reads_a_huge_file_whole(tmp_path):
    os.mkfifo(str(tmp_path / "fifo"))
    assert observed_file(str(tmp_path / "fifo"))["regular"] is False
    with open(str(tmp_path / "sparse"), "wb") as sparse:
        sparse.truncate(8 << 30)
    assert observed_file(str(tmp_path / "sparse"))["regular"] is False
