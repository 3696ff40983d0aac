"""mlsubmit_runtime and the name `trainer`: mlsubmit installs and imports no `trainer` package, a user's own
`trainer` package lives beside mlsubmit in one environment, and the runtime reaches a trainer that uses it."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import tarfile
import tomllib
from pathlib import Path

import pytest
from support.tiny_package import make_project, write

from mlsubmit.packaging import plan_sdist
from mlsubmit.packaging.runtime_dist import build_runtime, needs_runtime
from mlsubmit_runtime import artifacts, devices, hypertune
from mlsubmit_runtime.errors import InputError

ROOT = Path(__file__).resolve().parent.parent


def test_mlsubmit_never_imports_the_bundled_trainer_and_its_wheel_does_not_install_it():
    importers = []
    for path in sorted((ROOT / "mlsubmit").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            importers += [f"{path.relative_to(ROOT)}: {n}" for n in names if n.split(".")[0] == "trainer"]
    assert importers == []
    wheel = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["hatch"]["build"]["targets"]["wheel"]
    assert wheel["packages"] == ["mlsubmit", "mlsubmit_runtime"] and wheel["dev-mode-exact"] is True


def test_the_runtime_imports_no_tensorflow_keras_or_google_client_when_imported():
    probe = ("import sys, mlsubmit_runtime.multi_gpu, mlsubmit_runtime.artifacts, mlsubmit_runtime.devices, "
             "mlsubmit_runtime.features, mlsubmit_runtime.hypertune, mlsubmit_runtime.kerasmod\n"
             "heavy = ('tensorflow', 'keras', 'tf_keras', 'google')\n"
             "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT)
    assert done.stdout.strip() == "[]"


def test_a_package_gets_the_runtime_when_it_requires_or_imports_it(tmp_path):
    plain = make_project(tmp_path / "plain")
    assert not needs_runtime(plan_sdist(plain))
    imports = make_project(tmp_path / "imports", task="from mlsubmit_runtime.devices import emulated_devices\n")
    assert needs_runtime(plan_sdist(imports))
    requires = make_project(tmp_path / "requires")
    setup_py = requires.parent / "setup.py"
    setup_py.write_text(setup_py.read_text().replace('["requests>=2", "numpy"]', '["MLSubmit_Runtime>=0.1"]'))
    assert needs_runtime(plan_sdist(requires))
    assert needs_runtime(plan_sdist(ROOT / "trainer"))  # the bundled trainer declares it like any user would


def test_the_runtime_sdist_is_reproducible_and_holds_only_the_runtime(tmp_path):
    first, second = build_runtime(tmp_path / "a"), build_runtime(tmp_path / "b")
    assert (first.filename, first.sha256) == ("mlsubmit_runtime-0.1.0.tar.gz", second.sha256)
    with tarfile.open(first.path) as archive:
        names = archive.getnames()
        pkg_info = archive.extractfile("mlsubmit_runtime-0.1.0/PKG-INFO").read().decode()
    assert "mlsubmit_runtime-0.1.0/mlsubmit_runtime/multi_gpu.py" in names
    assert not [n for n in names if "/trainer/" in n or "/mlsubmit/" in n or "__pycache__" in n]
    assert "Name: mlsubmit-runtime" in pkg_info


@pytest.mark.parametrize("version", ["3.7"])
def test_the_runtime_installs_and_imports_on_every_python_an_image_has_with_no_framework(tmp_path, version,
                                                                                         monkeypatch):
    """Legacy runtimes run Python 3.7, the oldest an image has: the runtime's sdist must install there (no
    Requires-Python above it, no framework requirement) and its framework-free modules import. The newer ones: 3.11
    is this suite's own (test_the_runtime_imports_no_tensorflow_keras_or_google_client_when_imported), and on 3.10
    pip installs the sdist into the job's environment on tf-cpu.2-17.py310, where the bundled trainer imports it
    (test_image_env.py::test_bundled_trainer_on_the_default_public_image_and_keras2_on_the_217_image_install_cleanly).
    The venv is made as an image's environment is (mlsubmit.images.envs.make_venv) and leaves nothing in the
    temporary folder: ensurepip on Python 3.7-3.9 copies pip's CA bundle out of its bundled wheel into a temporary
    file it never removes (265,969 bytes on 3.7, measured)."""
    from support.engine_clusters import pyenv_pythons

    from mlsubmit.images.envs import make_venv

    found = pyenv_pythons(version)
    if not found:
        pytest.skip(f"no Python {version} (pyenv) on this machine")
    sdist = build_runtime(tmp_path / "dist")
    venv = tmp_path / "venv"
    outer = tmp_path / "tmp"
    outer.mkdir()
    with monkeypatch.context() as patch:
        patch.setenv("TMPDIR", str(outer))
        make_venv(found[0], venv)
    assert list(outer.iterdir()) == []
    done = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                           str(sdist.path)], capture_output=True, text=True, timeout=300)  # as the image's pip does
    assert done.returncode == 0, done.stderr[-2000:]
    imported = subprocess.run([str(venv / "bin" / "python"), "-c", "import mlsubmit_runtime.artifacts, "
                               "mlsubmit_runtime.hypertune, mlsubmit_runtime.devices, mlsubmit_runtime.kerasmod, "
                               "mlsubmit_runtime.storage, mlsubmit_runtime.chatter; print('ok')"],
                              capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert imported.stdout.strip() == "ok", imported.stderr[-2000:]


def test_emulated_devices_come_from_the_environment():
    assert devices.emulated_devices({}) == 0 and devices.emulated_devices({"MLSUBMIT_EMULATE_DEVICES": "2"}) == 2
    with pytest.raises(InputError, match="MLSUBMIT_EMULATE_DEVICES: received 'two'"):
        devices.emulated_devices({"MLSUBMIT_EMULATE_DEVICES": "two"})


def test_publish_dir_copies_every_file_and_writes_the_manifest_last(tmp_path):
    out = write(tmp_path / "out" / "model" / "weights.bin", b"\0" * 10).parent.parent
    write(out / "notes.txt", "hello")
    manifest = artifacts.publish_dir(out, str(tmp_path / "job"))
    assert [(f["path"], f["size"]) for f in manifest["files"]] == [("model/weights.bin", 10), ("notes.txt", 5)]
    written = json.loads((tmp_path / "job" / "MANIFEST.json").read_text())
    assert written["files"] == manifest["files"] and (tmp_path / "job" / "notes.txt").read_text() == "hello"
    newest = max((p for p in (tmp_path / "job").rglob("*") if p.is_file()), key=lambda p: p.stat().st_mtime_ns)
    assert newest.name == "MANIFEST.json"


def test_tuning_metrics_are_written_as_cloudml_hypertune_writes_them(tmp_path, monkeypatch):
    monkeypatch.setenv("CLOUD_ML_HP_METRIC_FILE", str(tmp_path / "hp" / "output.metrics"))
    monkeypatch.setenv("CLOUD_ML_TRIAL_ID", "3")
    reporter = hypertune._FileReporter()
    reporter.report_hyperparameter_tuning_metric("accuracy", 0.5, global_step=1)
    reporter.report_hyperparameter_tuning_metric("accuracy", 0.75, global_step=2)
    lines = [json.loads(line) for line in (tmp_path / "hp" / "output.metrics").read_text().splitlines()]
    assert [(e["trial"], e["accuracy"], e["global_step"]) for e in lines] == [("3", "0.5", "1"), ("3", "0.75", "2")]


USER_TASK = '''\
import argparse, os, pathlib, tempfile

from mlsubmit_runtime.artifacts import publish_dir
from mlsubmit_runtime.devices import emulated_devices


def main():
    parser = argparse.ArgumentParser(prog="trainer.task")
    parser.add_argument("--output_dir", default=os.environ.get("AIP_MODEL_DIR"))
    args = parser.parse_args()
    print("the user's trainer; emulated devices offered:", emulated_devices(), "hello", os.environ.get("HELLO"))
    work = pathlib.Path(tempfile.mkdtemp())
    (work / "model.txt").write_text("weights")
    publish_dir(work, args.output_dir)


if __name__ == "__main__":
    main()
'''


def _tool_environment(tmp_path: Path) -> tuple[Path, dict]:
    """A venv like a user's: mlsubmit's two packages (what its wheel installs) and the user's own `trainer`
    package installed with `pip install -e`; the dependencies (TensorFlow…) come from the test's environment."""
    from mlsubmit.packaging.preflight import create_venv

    tool = tmp_path / "tool"
    tool.mkdir()
    for package in ("mlsubmit", "mlsubmit_runtime"):
        (tool / package).symlink_to(ROOT / package)
    python = create_venv(tmp_path / "venv")
    project = tmp_path / "census"
    write(project / "setup.py", 'from setuptools import setup\nsetup(name="census", version="0.1", '
                                'packages=["trainer"], install_requires=["mlsubmit-runtime"])\n')
    write(project / "trainer" / "__init__.py", "")
    write(project / "trainer" / "task.py", USER_TASK)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") and k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(PYTHONPATH=str(tool), NO_COLOR="1", PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    # compat mode: a static .pth (what older setuptools always wrote), so `trainer` is the user's whatever else the
    # test environment puts on sys.path after it (a development checkout's root, say)
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                    "--config-settings", "editable_mode=compat", "-e", str(project)],
                   check=True, env=env, capture_output=True, cwd=tmp_path)
    return python, env


@pytest.mark.slow
def test_a_users_own_trainer_package_beside_mlsubmit_breaks_nothing_and_uses_the_runtime(tmp_path):
    python, env = _tool_environment(tmp_path)
    cwd = tmp_path

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(python), *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=240)

    assert run("-c", "import trainer; print(trainer.__file__)").stdout.strip() == \
        str(tmp_path / "census" / "trainer" / "__init__.py")  # `trainer` is the user's in this environment
    assert run("-m", "mlsubmit", "--help").returncode == 0

    trained = run("-m", "mlsubmit", "train", "--local", "--package-path", str(tmp_path / "census" / "trainer"),
                  "--gpus", "2", "--env", "HELLO=world", "--job-dir", "out")
    assert trained.returncode == 0, trained.stdout[-2000:] + trained.stderr[-2000:]
    out = trained.stdout
    assert "trainer census-0.1.tar.gz with mlsubmit_runtime-0.1.0.tar.gz" in out  # installed beside it
    assert "job census_" in out  # named after the package
    emulated = "2" if "MLSUBMIT_EMULATE_DEVICES=2" in out else "0"  # 0 on a machine with 2 GPUs
    assert f"the user's trainer; emulated devices offered: {emulated} hello world" in out
    assert f"base output directory: {tmp_path / 'out'}/ — 2 files; model/MANIFEST.json lists 1 of them" in out

    import keras
    import numpy as np

    model = tmp_path / "model.keras"
    keras.Sequential([keras.Input((3,)), keras.layers.Dense(2, activation="softmax")]).save(model)
    np.savez(tmp_path / "x.npz", x_test=np.ones((4, 3), np.float32))
    predicted = run("-m", "mlsubmit", "predict", str(model), "--input", str(tmp_path / "x.npz"),
                    "--output", str(tmp_path / "p.csv"))
    assert predicted.returncode == 0, predicted.stderr[-2000:]
    assert (tmp_path / "p.csv").read_text().count("\n") == 5


def test_a_backup_interrupted_while_it_is_sent_resumes_from_the_last_whole_one(gcs, tmp_path, monkeypatch):
    """A preemption can stop a replica while it sends its backup; what it resumes from must be one epoch's files,
    never the new weights beside the old epoch number."""
    from google.cloud.storage import Blob

    from mlsubmit_runtime.storage import Location

    _, bucket = gcs
    local = tmp_path / "backup"
    (local / "chief").mkdir(parents=True)
    place = Location(f"gs://{bucket}/run/checkpoints", local)

    def backup(epoch: int) -> None:
        (local / "chief" / "latest.weights.h5").write_text(f"weights after epoch {epoch}")
        (local / "training_metadata.json").write_text(json.dumps({"epoch": epoch}))

    def resumed(name: str) -> dict[str, str]:
        copy = Location(place.uri, tmp_path / name)
        copy.pull_snapshot()
        return {p.relative_to(copy.local).as_posix(): p.read_text() for p in copy.local.rglob("*") if p.is_file()}

    backup(1)
    place.push_snapshot()
    backup(2)
    upload, sent = Blob.upload_from_filename, []

    def preempted_after_one_file(blob, *args, **kwargs):
        if sent:
            raise ConnectionAbortedError("preempted")
        sent.append(blob.name)
        return upload(blob, *args, **kwargs)

    monkeypatch.setattr(Blob, "upload_from_filename", preempted_after_one_file)
    with pytest.raises(ConnectionAbortedError):
        place.push_snapshot()
    monkeypatch.setattr(Blob, "upload_from_filename", upload)
    assert len(sent) == 1  # epoch 2's weights were sent, its epoch number was not
    assert resumed("after-preemption") == {"chief/latest.weights.h5": "weights after epoch 1",
                                           "training_metadata.json": '{"epoch": 1}'}

    place.push_snapshot()  # a whole push: epoch 2, and the older snapshots are gone
    assert resumed("after-epoch-2") == {"chief/latest.weights.h5": "weights after epoch 2",
                                        "training_metadata.json": '{"epoch": 2}'}
    names = [blob.name for blob in place.bucket.client.list_blobs(bucket, prefix="run/checkpoints/")]
    assert len({name.split("/")[3] for name in names if "/snapshots/" in name}) == 1 and len(names) == 3
    place.clear_remote()
    assert not list(place.bucket.client.list_blobs(bucket, prefix="run/checkpoints/"))
    assert resumed("after-the-end") == {}
