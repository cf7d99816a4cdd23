"""bench/installer.py's comparison of two virtualenvs of one lock: every file each RECORD lists, by sha256, and
the differences sorted into the installers' own doing and the wheels' files; and the check that a downloaded
wheelhouse is exactly the lock's wheels. Small virtualenvs written here, no installer run."""
import hashlib
import importlib.util
import os
import resource
import sys
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[3]
SPEC = importlib.util.spec_from_file_location("bench_installer", str(CHECKOUT / "bench" / "installer.py"))
installer = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(installer)

SITE = "lib/python3.11/site-packages"
PIP_SCRIPT = b"#!/work/venv-pip/bin/python\n# -*- coding: utf-8 -*-\nimport re\nimport sys\nfrom tool import main\n"
UV_SCRIPT = b"#!/work/venv-uv/bin/python\n# -*- coding: utf-8 -*-\nimport sys\nfrom tool import main\n"


def sha(content):
    return hashlib.sha256(content).hexdigest()


def venv(root, files, record=None, entry_points="[console_scripts]\ntool = tool:main\n", name="Tool_Kit"):
    """A virtualenv at root with one distribution more (name 1.0) holding files ({path relative to the virtualenv:
    bytes}), its RECORD listing record (default: every file, and RECORD itself)."""
    info = "%s/%s-1.0.dist-info" % (SITE, name.lower())
    files = dict(files)
    files.setdefault(info + "/METADATA", ("Metadata-Version: 2.1\nName: %s\nVersion: 1.0\n\nA long description.\n"
                                          % name).encode())
    if entry_points is not None:
        files.setdefault(info + "/entry_points.txt", entry_points.encode())
    for path, content in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(content)
    listed = list(files) if record is None else record
    lines = ["%s,sha256=x,1" % os.path.relpath(str(root / path), str(root / SITE))
             for path in listed] + ["%s-1.0.dist-info/RECORD,," % name.lower()]
    (root / info / "RECORD").write_text("\n".join(lines) + "\n")
    return root


def entry(content=b"x", entry_point=False, body=None, distributions=("tool-kit",)):
    return {"distributions": list(distributions), "sha256": sha(content), "body": body, "entry_point": entry_point}


def test_the_manifest_hashes_every_file_a_record_lists_by_its_path_in_the_virtualenv(tmp_path):
    root = venv(tmp_path / "v", {SITE + "/tool/__init__.py": b"print(1)\n", "bin/tool": PIP_SCRIPT,
                                 "bin/helper": b"#!/usr/bin/python\nbody\n", SITE + "/unlisted.py": b"no"},
                record=[SITE + "/tool/__init__.py", "bin/tool", "bin/helper", SITE + "/gone.py"])
    files, versions = installer.manifest(root)
    assert versions == {"tool-kit": "1.0"}
    assert files["lib/python3.11/site-packages/tool/__init__.py"] == entry(b"print(1)\n")
    # A script the installer generates from entry_points.txt, and one the wheel ships, each with its body apart.
    assert files["bin/tool"] == entry(PIP_SCRIPT, entry_point=True, body=sha(PIP_SCRIPT.partition(b"\n")[2]))
    assert files["bin/helper"] == entry(b"#!/usr/bin/python\nbody\n", body=sha(b"body\n"))
    # A file that RECORD lists and the disk lacks is there with no hash; one that no RECORD lists is not there.
    assert files["lib/python3.11/site-packages/gone.py"]["sha256"] is None
    assert "lib/python3.11/site-packages/unlisted.py" not in files
    assert files["lib/python3.11/site-packages/tool_kit-1.0.dist-info/RECORD"]["sha256"] is not None


def test_a_file_outside_bin_keeps_no_body_and_a_distribution_without_entry_points_generates_no_script(tmp_path):
    root = venv(tmp_path / "v", {SITE + "/tool/run.py": b"#!/usr/bin/python\nx\n", "bin/tool": PIP_SCRIPT},
                entry_points=None)
    files = installer.manifest(root)[0]
    assert files[SITE + "/tool/run.py"]["body"] is None
    assert files["bin/tool"]["entry_point"] is False


def test_only_a_script_in_bin_is_an_entry_point(tmp_path):
    files = installer.manifest(venv(tmp_path / "v", {SITE + "/tool/tool": b"x", "bin/tool": PIP_SCRIPT}))[0]
    assert files[SITE + "/tool/tool"]["entry_point"] is False
    assert files["bin/tool"]["entry_point"] is True


def test_two_virtualenvs_of_the_same_files_are_byte_identical(tmp_path):
    first = installer.manifest(venv(tmp_path / "a", {SITE + "/tool/__init__.py": b"1"}))[0]
    second = installer.manifest(venv(tmp_path / "b", {SITE + "/tool/__init__.py": b"1"}))[0]
    assert installer.compare_files(first, second) == []


def test_every_difference_is_sorted_into_the_installers_doing_or_the_package_files(tmp_path):
    pip = venv(tmp_path / "pip", {
        SITE + "/tool/__init__.py": b"same", SITE + "/tool/__pycache__/__init__.cpython-311.pyc": b"pyc",
        SITE + "/tool/data.bin": b"from the wheel", SITE + "/tool_kit-1.0.dist-info/INSTALLER": b"pip\n",
        SITE + "/tool_kit-1.0.dist-info/REQUESTED": b"", "bin/tool": PIP_SCRIPT,
        "bin/helper": b"#!/work/venv-pip/bin/python\nbody\n"})
    uv = venv(tmp_path / "uv", {
        SITE + "/tool/__init__.py": b"same", SITE + "/tool/data.bin": b"something else",
        SITE + "/tool_kit-1.0.dist-info/INSTALLER": b"uv\n", SITE + "/tool/extra.py": b"",
        "bin/tool": UV_SCRIPT, "bin/helper": b"#!/work/venv-uv/bin/python\nbody\n"})
    differences = installer.compare_files(installer.manifest(pip)[0], installer.manifest(uv)[0])
    assert differences == [
        ("bin/helper", "script interpreter lines", "content"),
        ("bin/tool", "entry-point scripts", "content"),
        (SITE + "/tool/__pycache__/__init__.cpython-311.pyc", "byte code", "only in the reference"),
        (SITE + "/tool/data.bin", "package files", "content"),
        (SITE + "/tool/extra.py", "package files", "only in the other"),
        (SITE + "/tool_kit-1.0.dist-info/INSTALLER", "installer metadata", "content"),
        (SITE + "/tool_kit-1.0.dist-info/RECORD", "installer metadata", "content"),
        (SITE + "/tool_kit-1.0.dist-info/REQUESTED", "installer metadata", "only in the reference"),
    ]
    assert installer.count_kinds(differences) == {"installer metadata": 3, "byte code": 1, "entry-point scripts": 1,
                                                  "script interpreter lines": 1, "files several wheels ship": 0,
                                                  "package files": 2}


def test_only_the_installers_own_dist_info_files_and_byte_code_are_theirs():
    kind = installer.kind
    assert kind(SITE + "/tool_kit-1.0.dist-info/direct_url.json", entry(), None) == "installer metadata"
    # The wheel's own dist-info files, and files named like the installer's elsewhere, are the package's.
    assert kind(SITE + "/tool_kit-1.0.dist-info/METADATA", entry(), entry(b"y")) == "package files"
    assert kind(SITE + "/tool/RECORD", entry(), entry(b"y")) == "package files"
    assert kind("bin/x.pyc", entry(), None) == "byte code"
    assert kind("bin/tool", None, entry(entry_point=True)) == "entry-point scripts"
    # A script whose body differs too, or that one side lacks, is a difference in the package.
    assert kind("bin/helper", entry(body="a"), entry(b"y", body="b")) == "package files"
    assert kind("bin/helper", entry(body="a"), None) == "package files"
    assert kind("bin/helper", entry(), entry(b"y")) == "package files"


def test_a_file_that_several_wheels_ship_is_listed_with_each_and_hashed_as_the_last_one_left_it(tmp_path):
    root = venv(tmp_path / "v", {SITE + "/build_backend.py": b"first", "bin/tool": PIP_SCRIPT}, name="A_Kit",
                entry_points=None)
    venv(root, {SITE + "/build_backend.py": b"second", "bin/tool": PIP_SCRIPT}, name="B_Kit",
         record=[SITE + "/build_backend.py", "bin/tool", SITE + "/build_backend.py"])
    files = installer.manifest(root)[0]
    assert files[SITE + "/build_backend.py"] == entry(b"second", distributions=["a-kit", "b-kit"])
    # Only B declares the script that both RECORDs list: it is one an installer generates. B's RECORD lists
    # build_backend.py twice (pip's RECORD can list a file again): B ships it once.
    assert files["bin/tool"]["entry_point"] is True
    assert installer.shared_files(files) == [("bin/tool", ["a-kit", "b-kit"]), (SITE + "/build_backend.py", ["a-kit", "b-kit"])]
    other = dict(files, **{SITE + "/build_backend.py": entry(b"first", distributions=["a-kit", "b-kit"])})
    assert installer.compare_files(files, other) == [(SITE + "/build_backend.py", "files several wheels ship", "content")]


def test_the_wheelhouse_must_hold_exactly_the_locks_wheels_with_their_hashes(tmp_path):
    wheels = [{"wheel": "a-1-py3-none-any.whl", "sha256": sha(b"a")}, {"wheel": "b-1-py3-none-any.whl", "sha256": sha(b"b")}]
    (tmp_path / "a-1-py3-none-any.whl").write_bytes(b"a")
    (tmp_path / "b-1-py3-none-any.whl").write_bytes(b"b")
    assert installer.wheelhouse_problems(tmp_path, wheels) == []
    (tmp_path / "b-1-py3-none-any.whl").write_bytes(b"tampered")
    (tmp_path / "c-1-py3-none-any.whl").write_bytes(b"c")
    (tmp_path / "a-1-py3-none-any.whl").unlink()
    assert installer.wheelhouse_problems(tmp_path, wheels) == [
        "c-1-py3-none-any.whl is not one of the lock's wheels",
        "a-1-py3-none-any.whl is missing",
        "b-1-py3-none-any.whl has sha256 %s, the lock says %s" % (sha(b"tampered"), sha(b"b")),
    ]


def test_the_time_of_a_run_counts_the_cpu_of_its_children():
    seconds, cpu = installer.timed([sys.executable, "-c", "sum(range(3000000))"], {})
    assert seconds > 0
    assert 0 < cpu <= seconds + 0.05


def test_the_cpu_of_a_run_is_its_user_and_system_time(monkeypatch):
    usage = iter([resource.struct_rusage((1.0, 2.0) + (0,) * 14), resource.struct_rusage((4.5, 7.0) + (0,) * 14)])
    monkeypatch.setattr(installer.resource, "getrusage", lambda who: next(usage))
    monkeypatch.setattr(installer, "run", lambda argv, env: None)
    assert installer.timed(["pip"], {})[1] == 8.5
