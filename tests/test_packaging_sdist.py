"""The sdist: reproducible bytes, what goes in and what never does, metadata read from setup.py, bad input."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from support.tiny_package import FAKE_SERVICE_ACCOUNT, make_project, write

from mlsubmit.errors import UsageError
from mlsubmit.packaging import build_sdist, plan_sdist
from mlsubmit.packaging.setup_meta import read_setup_py

ROOT = Path(__file__).resolve().parent.parent


def members(sdist) -> dict[str, tarfile.TarInfo]:
    with tarfile.open(sdist.path) as tar:
        return {m.name: m for m in tar.getmembers()}


def names(sdist) -> set[str]:
    return {name.split("/", 1)[1] for name in members(sdist)}


@pytest.fixture
def project(tmp_path) -> Path:
    return make_project(tmp_path / "proj")


def test_same_sources_give_the_same_bytes_anywhere(project, tmp_path):
    first = build_sdist(project, dist_dir=tmp_path / "d1")
    second = build_sdist(project, dist_dir=tmp_path / "d2")
    assert first.sha256 == second.sha256
    assert first.path.read_bytes() == second.path.read_bytes()

    copy = tmp_path / "elsewhere" / "deeper" / "proj"
    shutil.copytree(project.parent, copy)
    for path in copy.rglob("*"):
        os.utime(path, (1_700_000_000, 1_700_000_000))
    assert build_sdist(copy / "tinypkg", dist_dir=tmp_path / "d3").sha256 == first.sha256

    (copy / "tinypkg" / "sub" / "mod.py").write_text("VALUE = 43\n")
    assert build_sdist(copy / "tinypkg", dist_dir=tmp_path / "d4").sha256 != first.sha256


def test_archive_entries_are_normalised(project, tmp_path):
    sdist = build_sdist(project, dist_dir=tmp_path / "dist")
    assert sdist.filename == "tinypkg-1.2.0.tar.gz"
    raw = sdist.path.read_bytes()
    assert raw[4:8] == b"\0\0\0\0"  # gzip mtime 0
    assert not raw[3] & 0x08  # no original file name in the gzip header
    entries = members(sdist)
    assert list(entries) == sorted(entries)
    assert all(name.startswith("tinypkg-1.2.0/") for name in entries)
    for info in entries.values():
        assert (info.mtime, info.uid, info.gid, info.uname, info.gname) == (315532800, 0, 0, "", "")
        assert info.mode == (0o755 if info.name.endswith("run.sh") else 0o644), info.name
    assert names(sdist) == {"PKG-INFO", "pyproject.toml", "setup.py", "tinypkg/__init__.py", "tinypkg/task.py",
                            "tinypkg/sub/__init__.py", "tinypkg/sub/mod.py", "tinypkg/data/config.json",
                            "tinypkg/run.sh"}
    assert set(sdist.files) == names(sdist)
    with tarfile.open(sdist.path) as tar:
        pkg_info = tar.extractfile("tinypkg-1.2.0/PKG-INFO").read().decode()
        setup_py = tar.extractfile("tinypkg-1.2.0/setup.py").read().decode()
        pyproject = tar.extractfile("tinypkg-1.2.0/pyproject.toml").read().decode()
    assert "Name: tinypkg\nVersion: 1.2.0\n" in pkg_info
    assert "Requires-Dist: requests>=2\nRequires-Dist: numpy\n" in pkg_info
    assert "'tinypkg.sub'" in setup_py and "'data/config.json'" in setup_py and "'run.sh'" in setup_py
    assert 'build-backend = "setuptools.build_meta"' in pyproject


def test_source_date_epoch_sets_every_mtime(project, tmp_path, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1600000000")
    sdist = build_sdist(project, dist_dir=tmp_path / "dist")
    assert {info.mtime for info in members(sdist).values()} == {1600000000}
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "yesterday")
    with pytest.raises(UsageError, match="SOURCE_DATE_EPOCH"):
        build_sdist(project, dist_dir=tmp_path / "dist")


def test_vcs_venvs_caches_and_build_output_never_go_in(project, tmp_path):
    planted = [".git/config", ".venv/pyvenv.cfg", ".venv/lib/site.py", "myenv/pyvenv.cfg", "myenv/bin/python",
               "venv/lib/x.py", "env/activate", "__pycache__/task.cpython-311.pyc", "stray.pyc", "sub/old.pyo",
               ".pytest_cache/v", "build/lib/x.py", "dist/old.tar.gz", "tinypkg.egg-info/PKG-INFO",
               ".mypy_cache/x.json", ".ipynb_checkpoints/nb.ipynb", "sub/__pycache__/mod.pyc"]
    for rel in planted:
        write(project / rel, "x")
    write(project / "envs" / "__init__.py", "")  # an RL environments subpackage is code
    write(project / "env2" / "__init__.py", "")
    write(project / "build_tools.py", "")
    sdist = build_sdist(project, dist_dir=tmp_path / "dist")
    inside = names(sdist)
    assert not [rel for rel in planted if f"tinypkg/{rel}" in inside]
    assert not [name for name in inside if any(part in name for part in (".git/", "pyvenv", "__pycache__", ".pyc"))]
    assert {"tinypkg/envs/__init__.py", "tinypkg/env2/__init__.py", "tinypkg/build_tools.py"} <= inside
    write(project / "env" / "__init__.py", "")  # `env/` that is a package stays
    assert "tinypkg/env/__init__.py" in names(build_sdist(project, dist_dir=tmp_path / "dist"))


def test_gitignore_and_mlsubmitignore_are_honoured(project, tmp_path):
    root = project.parent
    write(root / ".gitignore", "*.log\nscratch/\n/tinypkg/notes.txt\n")
    write(project / ".mlsubmitignore", "data/*.csv\n!important.log\n# comment\n\\#literal\n")
    for rel in ("a.log", "important.log", "scratch/x.py", "deep/scratch/y.py", "data/t.csv", "notes.txt",
                "deep/notes.txt", "#literal"):
        write(project / rel, "x")
    inside = names(build_sdist(project, dist_dir=tmp_path / "dist"))
    assert {"tinypkg/important.log", "tinypkg/deep/notes.txt", "tinypkg/data/config.json"} <= inside
    for left_out in ("a.log", "scratch/x.py", "deep/scratch/y.py", "data/t.csv", "notes.txt", "#literal",
                     ".mlsubmitignore"):
        assert f"tinypkg/{left_out}" not in inside
    plan = plan_sdist(project)
    assert any(s.path == "tinypkg/a.log" and s.reason == "ignored by .gitignore:1" for s in plan.skipped)


def test_credentials_never_go_in_whatever_the_ignore_files_say(project, tmp_path):
    planted = {
        "sa-key.json": FAKE_SERVICE_ACCOUNT,
        ".env": "API_TOKEN=abc\n",
        ".env.production": "X=1\n",
        "certs/server.pem": "-----BEGIN CERTIFICATE-----\n",
        "store.p12": b"\x30\x82",
        "id_rsa": "-----BEGIN OPENSSH PRIVATE KEY-----\n",
        "notes/key.txt": "-----BEGIN RSA PRIVATE KEY-----\nabc\n-----END RSA PRIVATE KEY-----\n",
        "adc.json": '{"type": "authorized_user", "refresh_token": "x"}',
        "other.json": '{"private_key": "x"}',
    }
    for rel, content in planted.items():
        write(project / rel, content)
    write(project / ".mlsubmitignore", "!.env\n!*.pem\n")
    write(project / "data" / "labels.json", '{"type": "classification"}')
    sdist = build_sdist(project, dist_dir=tmp_path / "dist")
    inside = names(sdist)
    assert not [rel for rel in planted if f"tinypkg/{rel}" in inside]
    assert "tinypkg/data/labels.json" in inside
    with tarfile.open(sdist.path) as tar:
        everything = b"".join(tar.extractfile(m).read() for m in tar.getmembers())
    assert b"PRIVATE KEY" not in everything and b"API_TOKEN" not in everything
    reasons = {item.path: item.reason for item in sdist.excluded_secrets}
    assert set(reasons) == {f"tinypkg/{rel}" for rel in planted}
    assert "service-account" in reasons["tinypkg/sa-key.json"]


def test_missing_package_or_no_init_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError) as err:
        plan_sdist(tmp_path / "nope")
    assert "--package-path" in err.value.one_line() and "does not exist" in err.value.one_line()
    assert err.value.exit_code == 2
    (tmp_path / "plain").mkdir()
    with pytest.raises(UsageError) as err:
        plan_sdist(tmp_path / "plain")
    assert "no __init__.py" in err.value.one_line()
    write(tmp_path / "my-pkg" / "__init__.py", "")
    with pytest.raises(UsageError, match="Python identifier"):
        plan_sdist(tmp_path / "my-pkg")


@pytest.mark.parametrize("setup_py, message", [
    ("from setuptools import setup\nsetup(name='x',\n", "syntax error on line"),
    # computed metadata goes to pypa/build, whose own error is shortened to its cause
    ("from setuptools import setup\nsetup(name='x', version=open('VERSION').read())\n",
     r"does not build with its backend .*No such file or directory: 'VERSION'"),
    ("from setuptools import setup\nsetup(version='1.0')\n", "names no name"),
    ("NAME = 'x'\nVERSION = 'one'\n", "PEP 440"),
    ("NAME = 'x'\nVERSION = '1'\nREQUIRED_PACKAGES = ['numpy>=>1']\n", "PEP 508"),
    (b"\xff\xfe\x00", "cannot read setup.py"),
])
def test_unreadable_setup_py_is_a_usage_error(project, setup_py, message):
    write(project.parent / "setup.py", setup_py)
    with pytest.raises(UsageError, match=message):
        plan_sdist(project)


def test_metadata_comes_from_setup_py_without_running_it(project, tmp_path):
    write(project.parent / "setup.py", "raise SystemExit('never run')\nNAME = 'tiny-pkg'\nVERSION = '2.0'\n"
                                       "setup(name=NAME, version=VERSION, install_requires=['a>=1'])\n")
    plan = plan_sdist(project)
    assert (plan.metadata.name, plan.metadata.version, plan.metadata.requires) == ("tiny-pkg", "2.0", ("a>=1",))
    assert plan.filename == "tiny_pkg-2.0.tar.gz"
    with pytest.raises(UsageError, match="cannot read setup.py"):
        plan_sdist(project, setup_py=tmp_path / "missing.py")
    (project.parent / "setup.py").unlink()
    defaults = plan_sdist(project).metadata  # like gcloud: no setup.py → the package's name, 0.0.0
    assert (defaults.name, defaults.version, defaults.requires) == ("tinypkg", "0.0.0", ())


def test_the_repository_setup_py_is_read_as_it_defines_itself():
    meta = read_setup_py(ROOT / "setup.py")
    # what the file defines when Python runs it (not as __main__, so setup() is not called); in a subprocess
    # because importing setuptools here would clash with a distutils another test may have imported
    code = ("import json, runpy, sys; d = runpy.run_path(sys.argv[1], run_name='not_main'); "
            "print(json.dumps([d['NAME'], d['VERSION'], d['REQUIRED_PACKAGES']]))")
    done = subprocess.run([sys.executable, "-c", code, str(ROOT / "setup.py")], capture_output=True, text=True,
                          check=True)
    assert [meta.name, meta.version, list(meta.requires)] == json.loads(done.stdout)
    assert meta.python_requires == ">=3.10"


def test_bundled_trainer_builds_reproducibly(tmp_path):
    first = build_sdist(ROOT / "trainer", dist_dir=tmp_path / "a")
    second = build_sdist(ROOT / "trainer", setup_py=ROOT / "setup.py", dist_dir=tmp_path / "b")
    assert first.sha256 == second.sha256 and first.filename == "trainer-0.1.0.tar.gz"
    assert {"trainer/__init__.py", "PKG-INFO", "setup.py"} <= set(first.files)
    assert not [name for name in first.files if "__pycache__" in name or name.endswith(".pyc")]
    with gzip.open(first.path) as raw:
        assert raw.read(1)  # a valid gzip stream
