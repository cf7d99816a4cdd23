"""The real-SGLang device run's own code (tests/device/real_sglang.py, real_sglang_wheelhouse.sh,
real_sglang_receive.sh, make_tiny_model.py), here without a GPU: which wheels travel, their download, their
pieces and batches, the round trip to a wheelhouse, and what the run's summary says."""
import hashlib
import importlib.util
import io
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

CHECKOUT = Path(__file__).resolve().parents[2]
DEVICE = CHECKOUT / "tests" / "device"


def load(name):
    spec = importlib.util.spec_from_file_location(name, DEVICE / (name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


real_sglang = load("real_sglang")
make_tiny_model = load("make_tiny_model")


def sha(data):
    return hashlib.sha256(data).hexdigest()


def wheel(name, environments, data, base="https://files.example/"):
    file_name = "%s-1.0-py3-none-any.whl" % name.replace("-", "_")
    return {file_name: {"sha256": sha(data), "url": base + file_name, "index": "https://pypi.org/simple",
                        "environments": environments}}


ENVIRONMENTS = ["cp312-x86_64", "cp312-aarch64"]
# torch needs filelock (which huggingface-hub needs too), triton (which xgrammar needs too), sympy (and through it
# mpmath) and, on x86_64 only, nvidia-cublas; sglang needs torch, huggingface-hub and xgrammar.
REQUIRES = {"torch": ["filelock", "nvidia-cublas", "sympy", "triton"], "sympy": ["mpmath"], "mpmath": [],
            "filelock": [], "nvidia-cublas": [], "triton": [], "huggingface-hub": ["filelock"],
            "xgrammar": ["torch", "triton"], "sglang": ["huggingface-hub", "torch", "xgrammar"]}


def make_lock(base="https://files.example/"):
    distributions = {}
    for name, requires in REQUIRES.items():
        environments = ["cp312-x86_64"] if name == "nvidia-cublas" else ENVIRONMENTS
        distributions[name] = {"version": "1.0", "requires": requires,
                               "wheels": wheel(name, environments, name.encode() * 100, base)}
    return {"format": 1, "profile": "sglang-test", "requirements": ["sglang==1.0"],
            "indexes": ["https://pypi.org/simple"], "environments": ENVIRONMENTS, "distributions": distributions}


def test_the_host_keeps_its_torch_and_what_only_torch_needs_and_gets_the_rest():
    wheels, left = real_sglang.plan(make_lock(), "cp312-x86_64")
    assert left == ["mpmath", "nvidia-cublas", "sympy", "torch"]
    assert [each["name"] for each in wheels] == ["filelock", "huggingface-hub", "sglang", "triton", "xgrammar"]
    assert wheels[0] == {"name": "filelock", "file": "filelock-1.0-py3-none-any.whl",
                         "url": "https://files.example/filelock-1.0-py3-none-any.whl", "sha256": sha(b"filelock" * 100)}


def test_an_environment_carries_only_the_wheels_chosen_for_it():
    wheels, left = real_sglang.plan(make_lock(), "cp312-aarch64")
    assert left == ["mpmath", "sympy", "torch"]
    assert "nvidia-cublas" not in [each["name"] for each in wheels]


def test_an_environment_the_lock_lacks_is_refused_naming_those_it_has():
    with pytest.raises(SystemExit, match="no environment cp311-x86_64; it has cp312-x86_64, cp312-aarch64"):
        real_sglang.plan(make_lock(), "cp311-x86_64")


class Answers:
    """A stand-in for urlopen: each URL's bytes, and the URLs asked."""

    def __init__(self, data):
        self.data = data
        self.asked = []

    def __call__(self, url, timeout):
        self.asked.append(url)
        return io.BytesIO(self.data[url])


def test_a_download_is_kept_only_with_the_locks_sha256_and_never_twice(tmp_path):
    wheels = [{"name": "a", "file": "a.whl", "url": "https://x/a.whl", "sha256": sha(b"good")}]
    answers = Answers({"https://x/a.whl": b"good"})
    real_sglang.download(wheels, str(tmp_path), answers)
    real_sglang.download(wheels, str(tmp_path), answers)
    assert (tmp_path / "a.whl").read_bytes() == b"good"
    assert answers.asked == ["https://x/a.whl"]


def test_a_download_with_another_sha256_fails_naming_the_file_and_leaves_nothing(tmp_path):
    wheels = [{"name": "a", "file": "a.whl", "url": "https://x/a.whl", "sha256": sha(b"good")}]
    with pytest.raises(SystemExit, match="a.whl: the file at https://x/a.whl has sha256 %s, the lock says %s"
                       % (sha(b"evil"), sha(b"good"))):
        real_sglang.download(wheels, str(tmp_path), Answers({"https://x/a.whl": b"evil"}))
    assert os.listdir(tmp_path) == []


def files_of(tmp_path):
    """[{path, dest, sha256}] of FILES, made in tmp_path."""
    specs = []
    for dest, name, size in FILES:
        data = bytes((len(name) + offset) % 251 for offset in range(size))
        (tmp_path / dest).mkdir(exist_ok=True)
        (tmp_path / dest / name).write_bytes(data)
        specs.append({"path": str(tmp_path / dest / name), "dest": dest, "sha256": sha(data)})
    return specs


# cffi goes to both folders: ansible-core's and the profile's.
FILES = [("wheelhouse", "big.whl", 2500), ("wheelhouse", "mid.whl", 700), ("wheelhouse", "cffi.whl", 300),
         ("wheelhouse", "tiny.whl", 90), ("ansible", "ansible_core.whl", 310), ("ansible", "cffi.whl", 300)]


def test_files_above_the_limit_are_split_and_every_batch_holds_at_most_the_limit(tmp_path):
    out = tmp_path / "out"
    manifest, loads = real_sglang.pack(files_of(tmp_path), str(out), 1000)
    big = next(entry for entry in manifest["files"] if entry["name"] == "big.whl")
    assert [(part["name"], part["size"]) for part in big["parts"]] == [
        ("wheelhouse/big.whl.part01", 1000), ("wheelhouse/big.whl.part02", 1000), ("wheelhouse/big.whl.part03", 500)]
    assert max(loads) <= 1000 and sum(loads) == sum(spec[2] for spec in FILES) == manifest["bytes"]
    assert manifest["batches"] == len(loads) == 5
    for number, load in enumerate(loads, 1):
        batch = out / ("batch-%02d" % number)
        assert sum(path.stat().st_size for path in batch.rglob("*.whl*")) == load
        assert json.loads((batch / "manifest.json").read_text()) == manifest


def receive(batch, root):
    """The receiving script, as root runs it on a host whose umask lets others read nothing."""
    return subprocess.run(["bash", "-c", 'umask 077 && exec "$@"', "receive", str(DEVICE / "real_sglang_receive.sh"),
                           str(batch), str(root)], cwd=CHECKOUT, capture_output=True, text=True, timeout=60,
                          check=False)


def test_the_batches_come_together_into_the_wheelhouse_whatever_their_order(tmp_path):
    specs = files_of(tmp_path)
    real_sglang.pack(specs, str(tmp_path / "out"), 1000)
    root = tmp_path / "host"
    for number in (3, 1, 5, 4):
        done = receive(tmp_path / "out" / ("batch-%02d" % number), root)
        assert done.returncode == 0, done.stderr
    assert "batches here: 1, 3-5 of 5; missing: 2" in done.stdout
    assert not (root / "wheelhouse").exists()
    done = receive(tmp_path / "out" / "batch-02", root)
    assert done.returncode == 0, done.stderr
    assert "all 5 batches here: 6 files, 0.0 MiB, every sha256 as the manifest says" in done.stdout
    for spec in specs:
        name = os.path.basename(spec["path"])
        folder = "ansible-wheels" if spec["dest"] == "ansible" else "wheelhouse"
        assert (root / folder / name).read_bytes() == Path(spec["path"]).read_bytes()
    assert sorted(path.name for path in (root / "ansible-wheels").iterdir()) == ["ansible_core.whl", "cffi.whl"]
    assert sorted(path.name for path in (root / "wheelhouse-parts").iterdir()) == ["complete.json", "manifest.json"]
    # ml_stack's pip reads the wheelhouse as the service user.
    assert oct((root / "wheelhouse").stat().st_mode & 0o777) == "0o755"
    assert oct((root / "wheelhouse" / "big.whl").stat().st_mode & 0o777) == "0o644"


def test_a_piece_that_changed_on_the_way_fails_naming_the_file_and_its_batches(tmp_path):
    real_sglang.pack(files_of(tmp_path), str(tmp_path / "out"), 1000)
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    big = next(entry for entry in manifest["files"] if entry["name"] == "big.whl")
    piece = tmp_path / "out" / ("batch-%02d" % big["parts"][1]["batch"]) / "wheelhouse" / "big.whl.part02"
    piece.write_bytes(b"x" + piece.read_bytes()[1:])
    for number in range(1, manifest["batches"] + 1):
        done = receive(tmp_path / "out" / ("batch-%02d" % number), tmp_path / "host")
    assert done.returncode == 1
    assert "big.whl: put together from 3 piece(s) it has sha256" in done.stderr
    assert "send its batches (%s) again" % ", ".join(str(part["batch"]) for part in big["parts"]) in done.stderr
    assert not (tmp_path / "host" / "wheelhouse" / "big.whl").exists()


def test_a_batch_of_another_wheelhouse_is_refused(tmp_path):
    real_sglang.pack(files_of(tmp_path), str(tmp_path / "out"), 1000)
    assert receive(tmp_path / "out" / "batch-01", tmp_path / "host").returncode == 0
    manifest = tmp_path / "out" / "batch-02" / "manifest.json"
    manifest.write_text(manifest.read_text().replace('"bytes"', '"bytes_"'))
    done = receive(tmp_path / "out" / "batch-02", tmp_path / "host")
    assert done.returncode == 1
    assert "belongs to another wheelhouse than the batches in" in done.stderr


# The script keeps its output out of git (.git/info/exclude): it runs in a checkout, where git is.
@pytest.mark.skipif(shutil.which("git") is None, reason="the wheelhouse script runs in a git checkout")
def test_the_wheelhouse_script_downloads_what_the_host_lacks_and_packs_it_beside_ansible(tmp_path):
    """The whole script in a repository of its own, the lock's URLs file:// ones."""
    repo = tmp_path / "repo"
    for relative in ("tests/device/real_sglang.py", "tests/device/real_sglang_wheelhouse.sh",
                     "plugins/module_utils/_stack/lock.py"):
        (repo / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(CHECKOUT / relative, repo / relative)
    served = tmp_path / "served"
    served.mkdir()
    lock = make_lock("file://%s/" % served)
    for name, distribution in lock["distributions"].items():
        for file_name in distribution["wheels"]:
            (served / file_name).write_bytes(name.encode() * 100)
    (repo / "lock.json").write_text(json.dumps(lock))
    (repo / ".whl").mkdir()
    (repo / ".whl" / "ansible_core-2.19.14-py3-none-any.whl").write_bytes(b"core")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    done = subprocess.run(["bash", "tests/device/real_sglang_wheelhouse.sh", "lock.json"], cwd=repo,
                          env=dict(os.environ, BATCH_MIB="1"), capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "5 wheels to carry; left to the host (its torch adopted): mpmath nvidia-cublas sympy torch" in done.stdout
    assert "6 files, 0.0 MiB in 1 batches of at most 1.0 MiB" in done.stdout
    batch = repo / ".device-wheels" / "batch-01"
    carried = sorted(str(path.relative_to(batch)) for path in batch.rglob("*") if path.is_file())
    assert carried == ["ansible/ansible_core-2.19.14-py3-none-any.whl", "manifest.json",
                       "wheelhouse/filelock-1.0-py3-none-any.whl", "wheelhouse/huggingface_hub-1.0-py3-none-any.whl",
                       "wheelhouse/sglang-1.0-py3-none-any.whl", "wheelhouse/triton-1.0-py3-none-any.whl",
                       "wheelhouse/xgrammar-1.0-py3-none-any.whl"]
    assert "/.device-wheels/" in (repo / ".git" / "info" / "exclude").read_text().splitlines()
    assert subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=repo, capture_output=True,
                          text=True, check=True).stdout.count(".device-wheels") == 0


def ansible_log(tmp_path, lines):
    log = tmp_path / "play.log"
    log.write_text("\n".join(lines) + "\n")
    return str(log)


READY = ('ok: [localhost] => {"changed": false, "elapsed": 83.25, "ready": true, "failure": null}')


def test_a_step_keeps_its_exit_status_seconds_and_the_seconds_wait_for_server_waited(tmp_path):
    log = ansible_log(tmp_path, [
        "$ ansible-playbook blackwell.gpu_node.site -v",
        "TASK [blackwell.gpu_node.sglang_server : Launch the server] ****",
        'changed: [localhost] => {"changed": true, "elapsed": 1.0}',
        "TASK [blackwell.gpu_node.sglang_server : Wait until the server is ready] ****",
        READY,
        "TASK [Something else] ****",
        'ok: [localhost] => {"elapsed": 2.0, "ready": true}',
        "[exit 0 after 141 s]"])
    assert real_sglang.step_result(log, 1) == {"exit": 0, "seconds": 141.0, "attempt": 1, "ready": 83.25}


def test_a_server_that_never_became_ready_has_no_seconds_to_ready(tmp_path):
    log = ansible_log(tmp_path, [
        "TASK [blackwell.gpu_node.sglang_server : Wait until the server is ready] ****",
        'fatal: [localhost]: FAILED! => {"changed": false, "elapsed": 20.5, "ready": false, "msg": "died"}',
        "[exit 2 after 30 s]"])
    assert real_sglang.step_result(log, 2) == {"exit": 2, "seconds": 30.0, "attempt": 2, "ready": None}


def test_the_diagnose_step_keeps_the_verdict_and_the_generated_text(tmp_path):
    log = ansible_log(tmp_path, ["[exit 0 after 12 s]"])
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"localhost": {"gpu": {}, "diagnosis": {
        "verdict": "running and serving (pid 7)",
        "serving": {"serving": True, "generate": {"text": " paris the gpu", "tokens": 8}}}}}))
    kept = real_sglang.step_result(log, 1, str(report))
    assert kept["verdict"] == "running and serving (pid 7)"
    assert (kept["text"], kept["tokens"]) == (" paris the gpu", 8)


def test_the_summary_tells_times_text_and_each_failures_diagnosis(tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    kept = {"install": {"exit": 0, "seconds": 201.0, "ready": None},
            "cold": {"exit": 0, "seconds": 150.0, "ready": 96.4},
            "diagnose": {"exit": 0, "seconds": 9.0, "ready": None, "verdict": "running and serving", "text": " paris",
                         "tokens": 8},
            "failure-unknown_flag": {"case": "unknown_flag", "launch": {"failed": False},
                                     "ready": {"ready": False, "elapsed": 14.2, "failure": {
                                         "cause": "error: unrecognized arguments: --no-such-flag",
                                         "diagnosis": {"id": "invalid_argument", "component": "SGLang",
                                                       "cause": "SGLang refused an argument."}}},
                                     "diagnosis": {"verdict": "not running; ..."}},
            "failure-missing_model": {"case": "missing_model", "launch": {"failed": True, "msg": "model_path=/x is not"},
                                      "ready": {"ready": None}, "diagnosis": {}},
            "failure-cache_not_writable": {"case": "cache_not_writable", "launch": {"failed": False},
                                           "ready": {"ready": True, "elapsed": 50.0}, "diagnosis": {"verdict": "running"}}}
    for name, value in kept.items():
        (results / (name + ".json")).write_text(json.dumps(value))
    text = real_sglang.summary(str(tmp_path))
    assert "site, first start of the server (cold)" in text and "exit 0 after 150.0 s ready after 96.4 s" in text
    assert "serve, second start (warm)" in text and "not run" in text
    assert "generate (diagnose's probe, as validate's): ' paris' (8 tokens)" in text
    assert ("- unknown_flag: error: unrecognized arguments: --no-such-flag after 14.2 s\n"
            "  diagnosis: [invalid_argument] SGLang: SGLang refused an argument. | diagnose: not running; ...") in text
    assert "- missing_model: refused by sglang_server before launch after -\n  diagnosis: model_path=/x is not" in text
    assert "- cache_not_writable: READY (no failure) after 50.0 s" in text


def test_the_tiny_models_config_matches_its_tokenizer_and_sizes():
    assert make_tiny_model.model_config("tiny", 70)["vocab_size"] == 70
    for size, low, high in (("tiny", 1.5e6, 2.5e6), ("large", 1e9, 2e9)):
        config = make_tiny_model.SIZES[size]
        hidden, layers = config["hidden_size"], config["num_hidden_layers"]
        kv = hidden // config["num_attention_heads"] * config["num_key_value_heads"]
        count = layers * (2 * hidden * hidden + 2 * hidden * kv + 3 * hidden * config["intermediate_size"])
        assert low < count < high, (size, count)
        assert hidden // config["num_attention_heads"] in (64, 128)


def test_the_tokenizer_knows_the_probes_words_and_decodes_words_to_text(tmp_path):
    pytest.importorskip("tokenizers")
    transformers = pytest.importorskip("transformers")
    tokenizer = make_tiny_model.write_tokenizer(str(tmp_path))
    assert [tokenizer.id_to_token(index) for index in range(4)] == list(make_tiny_model.SPECIAL)
    encoded = tokenizer.encode("The capital of France is")
    assert encoded.ids[0] == 1 and 0 not in encoded.ids
    loaded = transformers.AutoTokenizer.from_pretrained(str(tmp_path))
    ids = loaded("The capital of France is")["input_ids"]
    assert ids == encoded.ids
    assert loaded.decode(ids, skip_special_tokens=True) == "the capital of france is"
    assert loaded.eos_token_id == 2 and loaded.pad_token_id == 3
    again = tmp_path / "again"
    again.mkdir()
    make_tiny_model.write_tokenizer(str(again))
    assert (again / "tokenizer.json").read_bytes() == (tmp_path / "tokenizer.json").read_bytes()
    config = transformers.LlamaConfig(**make_tiny_model.model_config("tiny", tokenizer.get_vocab_size()))
    assert (config.vocab_size, config.head_dim, config.eos_token_id) == (tokenizer.get_vocab_size(), 64, 2)
