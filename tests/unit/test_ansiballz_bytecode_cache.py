"""The scenarios' node images keep the byte code of Ansible's payloads between module runs
(tests/fixtures/node_image/ansiballz_bytecode_cache.py): what runs is always what the zip holds."""
import importlib.util
import marshal
import os
import subprocess
import sys
import tempfile
import zipfile
import zipimport
from pathlib import Path

import pytest

HOOK = Path(__file__).resolve().parents[1] / "fixtures" / "node_image" / "ansiballz_bytecode_cache.py"
spec = importlib.util.spec_from_file_location("ansiballz_bytecode_cache", HOOK)
cache = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cache)


def payload(tmp_path, name, answer):
    """A zip laid out as AnsiballZ lays it out, holding package pkg with module NAME whose ANSWER is answer."""
    run = tempfile.mkdtemp(prefix="ansible_command_payload_", dir=str(tmp_path))
    path = Path(run) / "ansible_command_payload.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("pkg/__init__.py", "")
        archive.writestr("pkg/%s.py" % name, "ANSWER = %r\n" % answer)
    return path


def load(path, name):
    """pkg.NAME imported through the hook from the zip at path, as a fresh interpreter would."""
    for module in [m for m in sys.modules if m == "pkg" or m.startswith("pkg.")]:
        del sys.modules[module]
    sys.path_importer_cache.clear()
    hooks, syspath = list(sys.path_hooks), list(sys.path)
    try:
        cache.install()
        sys.path.insert(0, str(path))
        return importlib.import_module("pkg." + name)
    finally:
        sys.path_hooks[:], sys.path[:] = hooks, syspath
        sys.path_importer_cache.clear()
        for module in [m for m in sys.modules if m == "pkg" or m.startswith("pkg.")]:
            del sys.modules[module]


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    directory = tmp_path / "cache"
    monkeypatch.setattr(cache.CachingZipImporter, "cache_dir", str(directory))
    monkeypatch.setattr(sys, "dont_write_bytecode", False)  # as `make` runs the tests, whatever the caller's
    return directory


def test_a_second_run_of_the_same_source_compiles_nothing(tmp_path, cache_dir, monkeypatch):
    assert load(payload(tmp_path, "basic", 1), "basic").ANSWER == 1
    assert len(os.listdir(cache_dir)) == 2  # the package and its module

    def refuse(*args, **kwargs):
        raise AssertionError("compiled again")

    monkeypatch.setattr(cache, "compile", refuse, raising=False)
    monkeypatch.setattr(zipimport, "_compile_source", refuse)
    assert load(payload(tmp_path, "basic", 1), "basic").ANSWER == 1


def test_a_module_from_the_cache_names_the_file_of_this_run(tmp_path, cache_dir):
    load(payload(tmp_path, "basic", 1), "basic")
    second = payload(tmp_path, "basic", 1)
    module = load(second, "basic")
    assert module.__file__ == str(second / "pkg" / "basic.py")
    assert module.__spec__.loader.get_code("pkg.basic").co_filename == module.__file__


def test_the_file_of_a_module_and_of_a_package_is_the_one_zipimport_names(tmp_path):
    path = str(payload(tmp_path, "basic", 1))
    where = {"pkg": path, "pkg.basic": path + "/pkg"}
    assert {name: cache.CachingZipImporter(at).get_filename(name) for name, at in where.items()} == {
        name: zipimport.zipimporter(at).get_filename(name) for name, at in where.items()}
    with pytest.raises(zipimport.ZipImportError):
        cache.CachingZipImporter(path + "/pkg").get_filename("pkg.absent")


def test_a_cache_entry_that_is_not_code_is_compiled_again(tmp_path, cache_dir):
    load(payload(tmp_path, "basic", 1), "basic")
    for entry in cache_dir.iterdir():
        entry.write_bytes(marshal.dumps(42))
    assert load(payload(tmp_path, "basic", 1), "basic").ANSWER == 1


def test_a_changed_source_is_compiled_and_runs_as_the_zip_holds_it(tmp_path, cache_dir):
    assert load(payload(tmp_path, "basic", 1), "basic").ANSWER == 1
    assert load(payload(tmp_path, "basic", 2), "basic").ANSWER == 2
    assert len(os.listdir(cache_dir)) == 3


def test_a_spoiled_cache_entry_is_compiled_again(tmp_path, cache_dir):
    load(payload(tmp_path, "basic", 1), "basic")
    for entry in cache_dir.iterdir():
        entry.write_bytes(b"not marshal data")
    assert load(payload(tmp_path, "basic", 1), "basic").ANSWER == 1


def test_a_cache_that_cannot_be_written_still_imports(tmp_path, monkeypatch):
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    monkeypatch.setattr(cache.CachingZipImporter, "cache_dir", str(blocked / "cache"))
    assert load(payload(tmp_path, "basic", 1), "basic").ANSWER == 1


def test_only_ansiballz_payloads_are_concerned(tmp_path):
    other = tmp_path / "other.zip"
    with zipfile.ZipFile(other, "w") as archive:
        archive.writestr("pkg/__init__.py", "")
    with pytest.raises(ImportError, match="not an AnsiballZ payload"):
        cache.payload_importer(str(other))
    assert isinstance(cache.payload_importer(str(payload(tmp_path, "basic", 1)) + "/pkg"), cache.CachingZipImporter)


def test_install_keeps_the_code_where_it_is_told(tmp_path, monkeypatch):
    monkeypatch.setattr(cache.CachingZipImporter, "cache_dir", cache.CACHE_DIR)
    hooks = list(sys.path_hooks)
    try:
        cache.install(str(tmp_path / "elsewhere"))
        assert cache.CachingZipImporter.cache_dir == str(tmp_path / "elsewhere")
        assert sys.path_hooks.count(cache.payload_importer) == 1
    finally:
        sys.path_hooks[:] = hooks


def test_another_byte_code_version_compiles_its_own(tmp_path, cache_dir, monkeypatch):
    load(payload(tmp_path, "basic", 1), "basic")
    monkeypatch.setattr(importlib.util, "MAGIC_NUMBER", b"\x00\x00\r\n")
    assert load(payload(tmp_path, "basic", 1), "basic").ANSWER == 1
    assert len(os.listdir(cache_dir)) == 4


def test_installing_the_hook_imports_nothing_the_interpreter_had_not():
    """The .pth file runs at every start of the interpreter, payload or not: nothing beyond what site imports."""
    check = subprocess.run(
        [sys.executable, "-S", "-c",
         "import site, sys; before = set(sys.modules);"
         " import ansiballz_bytecode_cache; ansiballz_bytecode_cache.install();"
         " print(sorted(set(sys.modules) - before - {'ansiballz_bytecode_cache'}))"],
        env=dict(os.environ, PYTHONPATH=str(HOOK.parent)), capture_output=True, text=True, check=True, timeout=60)
    assert check.stdout.strip() == "[]"


def test_an_interpreter_told_to_write_no_byte_code_writes_no_cache(tmp_path, cache_dir, monkeypatch):
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    assert load(payload(tmp_path, "basic", 1), "basic").ANSWER == 1
    assert not cache_dir.exists()
