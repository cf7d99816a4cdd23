"""Reset the GPUs asked for and no other (the gpu_reset core): each index proven to be the GPU planned, refused while a
process holds one, one nvidia-smi -r -i call per GPU, stopping at the first that fails; check mode resets nothing."""
import pytest

from ansible_collections.blackwell.gpu_node.plugins.module_utils._node import gpu_reset as core

SMI = "/usr/bin/nvidia-smi"
GPUS = [dict(index=0, bus_id="00000000:3B:00.0"), dict(index=1, bus_id="00000000:5E:00.0")]
LISTED = "0, 00000000:3B:00.0\n1, 00000000:5E:00.0\n2, 00000000:86:00.0\n"
# The driver's information file of a GPU, as /proc/driver/nvidia/gpus/<bus id>/information prints it.
INFORMATION = "Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 123\nBus Location: \t 0000:3b:00.0\nDevice Minor: \t %d\n"


def answers(apps="", fail=None):
    """run(argv) answering nvidia-smi's queries, the resets succeeding but for the index in fail."""
    calls = []

    def run(argv):
        calls.append(argv)
        if argv[1:] == list(core.LIST_ARGV):
            return 0, LISTED, ""
        if argv[1:] == list(core.APPS_ARGV):
            return 0, apps, ""
        if argv[1:3] == ["-r", "-i"]:
            if argv[3] == fail:
                return 3, "", "Unable to reset GPU 00000000:5E:00.0 because it's being used by some other process"
            return 0, "GPU %s was successfully reset.\nAll done.\n" % GPUS[int(argv[3])]["bus_id"], ""
        raise AssertionError(argv)
    return run, calls


def reset(gpus=None, run=None, information=None, holders=None, check=False, nvidia_smi=SMI):
    asked = []

    def device_holders(patterns):
        asked.append(patterns)
        return holders or {}
    result = core.reset(GPUS if gpus is None else gpus, nvidia_smi, run or answers()[0],
                        (information or {}).get, device_holders,
                        lambda pid: {4242: "python3", 1500: "nvidia-persistenced"}[pid], check)
    return result, asked


def test_each_gpu_is_reset_by_its_index_once_nothing_holds_it():
    run, calls = answers(apps="77, 00000000:86:00.0\n")
    result, asked = reset(run=run, information={"0000:3b:00.0": INFORMATION % 0, "0000:5e:00.0": INFORMATION % 3})
    assert calls[2:] == [[SMI, "-r", "-i", "0"], [SMI, "-r", "-i", "1"]]
    assert result == dict(changed=True, problem=None, holders=[], commands=calls[2:], reset=[
        dict(GPUS[0], output="GPU 00000000:3B:00.0 was successfully reset. All done."),
        dict(GPUS[1], output="GPU 00000000:5E:00.0 was successfully reset. All done.")])
    # Each GPU's own device file, from the driver's minor numbers: the process on GPU 2 does not hold them.
    assert asked == [["/dev/nvidia0", "/dev/nvidia3"]]


def test_without_the_drivers_minor_every_gpus_device_file_counts():
    _result, asked = reset(information={"0000:3b:00.0": INFORMATION % 0})
    assert asked == [["/dev/nvidia[0-9]*"]]


@pytest.mark.parametrize("apps, holders, said", [
    ("4242, 00000000:5E:00.0\n", {}, "pid 4242 (python3) has a compute context on GPU 1 (00000000:5E:00.0)"),
    ("", {1500: ["/dev/nvidia0"]}, "pid 1500 (nvidia-persistenced) has /dev/nvidia0"),
])
def test_a_gpu_a_process_holds_is_not_reset_and_the_process_is_named(apps, holders, said):
    run, calls = answers(apps=apps)
    result, _asked = reset(run=run, holders=holders)
    assert [argv for argv in calls if "-r" in argv] == []
    assert (result["changed"], result["reset"]) == (False, [])
    assert result["problem"] == ("GPU 0 (00000000:3B:00.0), GPU 1 (00000000:5E:00.0) held: %s. Nothing was reset: stop "
                                 "them first (nvidia-persistenced, nv-hostengine and dcgm-exporter hold every GPU)"
                                 % said)


def test_check_mode_resets_nothing_and_says_what_holds_the_gpus():
    run, calls = answers(apps="4242, 00000000:3B:00.0\n")
    result, _asked = reset(run=run, check=True)
    assert [argv for argv in calls if "-r" in argv] == []
    assert (result["changed"], result["problem"], result["reset"]) == (True, None, [])
    assert result["holders"] == [dict(pid=4242, name="python3", holds="a compute context on GPU 0 (00000000:3B:00.0)")]
    assert result["commands"] == [[SMI, "-r", "-i", "0"], [SMI, "-r", "-i", "1"]]


def test_an_index_that_names_another_gpu_now_resets_nothing():
    run, calls = answers()
    result, _asked = reset(gpus=[dict(index=1, bus_id="00000000:3B:00.0")], run=run)
    assert calls == [[SMI] + list(core.LIST_ARGV)]
    assert result["problem"] == ("nvidia-smi lists 00000000:5E:00.0 at index 1, not 00000000:3B:00.0: nothing was "
                                 "reset; read the GPUs' health again and plan anew")
    gone, _asked = reset(gpus=[dict(index=7, bus_id="00000000:3B:00.0")])
    assert gone["problem"].startswith("nvidia-smi lists no GPU at index 7, not 00000000:3B:00.0")


def test_a_failed_reset_stops_there_and_says_which_were_reset():
    run, calls = answers(fail="1")
    result, _asked = reset(run=run)
    assert [entry["index"] for entry in result["reset"]] == [0]
    assert result["changed"] is True
    assert result["problem"] == ("/usr/bin/nvidia-smi -r -i 1 failed (exit code 3): Unable to reset GPU "
                                 "00000000:5E:00.0 because it's being used by some other process")
    first, _asked = reset(gpus=GPUS[1:], run=answers(fail="1")[0])
    assert (first["changed"], first["reset"]) == (False, [])


def test_without_nvidia_smi_or_its_answers_nothing_is_reset():
    assert reset(nvidia_smi=None)[0]["problem"] == "nvidia-smi is not installed: no GPU can be reset"

    def broken(query):
        def run(argv):
            if argv[1:] == list(query):
                return 9, "", "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
            return answers()[0](argv)
        return run
    assert reset(run=broken(core.LIST_ARGV))[0]["problem"] == (
        "nvidia-smi could not list the GPUs (exit code 9): NVIDIA-SMI has failed because it couldn't communicate "
        "with the NVIDIA driver.")
    assert reset(run=broken(core.APPS_ARGV))[0]["problem"].startswith(
        "nvidia-smi could not list the processes on the GPUs (exit code 9): NVIDIA-SMI has failed")


@pytest.mark.parametrize("text, key", [
    ("00000000:3B:00.0", "0000:3b:00.0"),
    ("0000:3b:00.0", "0000:3b:00.0"),
    ("00000001:C1:00.0", "0001:c1:00.0"),
])
def test_a_bus_id_is_compared_as_the_drivers_files_write_it(text, key):
    assert core.bus_key(text) == key


def test_the_outputs_are_read_row_by_row_and_odd_rows_are_skipped():
    assert core.listed_gpus("0, 00000000:3B:00.0\nNo devices were found\nx, 00000000:5E:00.0\n") == {
        0: "00000000:3B:00.0"}
    assert core.compute_apps("4242, 00000000:3B:00.0\n[N/A], 00000000:5E:00.0\n") == [(4242, "00000000:3B:00.0")]
    assert core.device_minor(INFORMATION % 5) == 5
    assert core.device_minor("Model: NVIDIA H100\n") is None
    assert core.device_minor(None) is None
