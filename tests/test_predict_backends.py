"""mlsubmit predict across Keras backends: members trained under JAX, PyTorch and TensorFlow predict the same in the
predicting process's backend, and a layer that does not carry across is one line naming it.

Tiny Conv2D + Dense job dirs are trained once per module, in parallel subprocesses, one per backend
(tests/support/backend_member.py, which publishes them with mlsubmit_runtime's manifest writer and saves each
model's own predictions made in its own backend; the JAX one then also predicts its custom-layer member through the
library, the way out a refusal names). The command runs in-process under TensorFlow through typer's
CliRunner (TensorFlow is imported once), and in a subprocess where another backend must predict.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from mlsubmit.cli import app
from mlsubmit_runtime.artifacts import publish_dir
from tests.support.one_line import refused
from tests.support.trainer_run import ROOT

SCRIPT = ROOT / "tests" / "support" / "backend_member.py"
MEMBERS = {"jax": ("jax", 1), "torch": ("torch", 2), "tensorflow": ("tensorflow", 3)}  # job dir: backend, seed
CUSTOM = "custom"  # trained under jax (beside "jax") with a layer class that lives only in the training script
FIXED = "custom-fixed.npz"  # what the JAX training process predicted from CUSTOM through the library, after training
# The JAX member's process: the training script imported (which registers its layer), its members trained, then the
# way out the refusal names (predict through the library with the training code imported) taken in that same
# process, a third backend start saved; what it raised, if anything, goes beside the file for the test to show.
JAX_PROCESS = """
import sys, traceback
sys.path.insert(0, 'tests/support')
import backend_member  # the training code: registers Doubling as it builds that member
backend_member.main(*sys.argv[1:])
from mlsubmit.predict.request import make_request
from mlsubmit.predict.run import predict
data, root, _, _, custom = sys.argv[1:]
try:
    predict(make_request([f'{root}/{custom}'], [data], output=f'{root}/%s'))
except BaseException:
    open(f'{root}/%s.error', 'w').write(traceback.format_exc())
""" % (FIXED, FIXED)
runner = CliRunner()


@dataclass(frozen=True)
class Trained:
    root: Path
    data: Path

    def job_dir(self, name: str) -> str:
        return str(self.root / name)

    def own_predictions(self, name: str) -> np.ndarray:
        """What the model predicted on x_test in the backend it was trained under."""
        return np.load(self.root / f"{name}.npy").astype(np.float64)

    def metrics(self, name: str) -> dict:
        return json.loads((self.root / name / "metrics.json").read_text())


def _env(**extra: str) -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "3", **extra}


def _data(path: Path) -> Path:
    """8×8 grey images, 3 classes: which third of the rows is brighter; fixed, learnable in a few steps."""
    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, size=192)
    x = rng.random((192, 8, 8, 1), dtype=np.float32) * 0.8
    for band in range(3):
        x[y == band, band * 3:band * 3 + 2] += 0.2
    np.savez(path, x_train=x[:128], y_train=y[:128], x_test=x[128:], y_test=y[128:])
    return path


def _inductor(backend: str, root: Path) -> dict:
    """Keras on torch makes torch's compiler cache folder at start-up, in the temporary folder unless told where:
    the module's folder instead (nothing left in the temporary folder)."""
    return {"TORCHINDUCTOR_CACHE_DIR": str(root / ".torchinductor")} if backend == "torch" else {}


def _keras_here_is_tensorflow() -> bool:
    """Whether this process's Keras runs (or, imported now, would run) on TensorFlow, as $KERAS_BACKEND says."""
    if os.environ.get("KERAS_BACKEND", "tensorflow") != "tensorflow":
        return False
    return "keras" not in sys.modules or sys.modules["keras"].backend.backend() == "tensorflow"


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Trained:
    """The members, side by side: JAX and torch each in a process of its own, TensorFlow's in this process when its
    Keras runs on TensorFlow (the tests predict here under TensorFlow anyway: a third backend start saved)."""
    root = tmp_path_factory.mktemp("backend-members")
    data = _data(root / "data.npz")
    here = _keras_here_is_tensorflow()
    procs = [subprocess.Popen([sys.executable, *(["-c", JAX_PROCESS] if backend == "jax" else [str(SCRIPT)]),
                               str(data), str(root), str(seed), name, *([CUSTOM] if backend == "jax" else [])],
                              cwd=ROOT, env=_env(KERAS_BACKEND=backend, **_inductor(backend, root)),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for name, (backend, seed) in MEMBERS.items() if not (here and backend == "tensorflow")]
    try:
        if here:
            from tests.support import backend_member

            backend_member.main(str(data), str(root), str(MEMBERS["tensorflow"][1]), "tensorflow")
    finally:
        outputs = [proc.communicate(timeout=240)[0] for proc in procs]
    for proc, output in zip(procs, outputs):
        assert proc.returncode == 0, output[-3000:]
    return Trained(root, data)


@pytest.fixture
def wide(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # rich tables: whole paths, no wrapping


def _npz(path: Path) -> dict:
    with np.load(path) as saved:
        return {key: saved[key] for key in saved.files}


@pytest.mark.parametrize("name", ["jax", "torch"])
def test_a_member_trained_under_jax_or_torch_predicts_the_same_under_tensorflow(trained, name, tmp_path):
    job_dir = trained.job_dir(name)
    listed = {f["path"] for f in json.loads((Path(job_dir) / "MANIFEST.json").read_text())["files"]}
    assert listed == {"metrics.json", "model/model.keras"}  # no .h5, no SavedModel: all a JAX/torch job writes
    out = tmp_path / "p.npz"
    result = runner.invoke(app, ["predict", job_dir, "--input", str(trained.data), "--output", str(out),
                                 "--backend", "tensorflow"])
    assert result.exit_code == 0, result.output
    saved = _npz(out)
    np.testing.assert_allclose(saved["probabilities"], trained.own_predictions(name), rtol=0, atol=1e-5)
    assert str(saved["backend"]) == "tensorflow" and saved["member_backends"].tolist() == [name]


def test_an_ensemble_of_jax_torch_and_tensorflow_members_reports_each_backend_and_weight(trained, wide, tmp_path):
    names = list(MEMBERS)
    out = tmp_path / "ensemble.json"
    result = runner.invoke(app, ["predict", *(trained.job_dir(n) for n in names), "--input", str(trained.data),
                                 "--labels", "y_test", "--output", str(out)])
    assert result.exit_code == 0, result.output

    weights = [trained.metrics(n)["test_accuracy"] for n in names]
    expected = sum(w * trained.own_predictions(n) for w, n in zip(weights, names)) / sum(weights)
    written = json.loads(out.read_text())
    got = np.array([row["probabilities"] for row in written["rows"]])
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-5)
    assert written["backend"] == "tensorflow" and written["member_backends"] == names

    lines = result.stdout.splitlines()
    for name, weight in zip(names, weights):
        metrics = trained.metrics(name)
        row = next(line for line in lines if trained.job_dir(name) in line)
        assert f"{metrics['backend']} {metrics['backend_version']}" in row, row
        assert f"{weight:.4g}" in row and "test accuracy" in row, row
    import tensorflow as tf

    assert f"predicted under tensorflow {tf.__version__}" in result.stdout


def test_a_layer_that_does_not_carry_across_is_one_line_naming_it_and_writes_nothing(trained, tmp_path):
    out = tmp_path / "p.csv"
    custom = trained.job_dir(CUSTOM)
    result = runner.invoke(app, ["predict", trained.job_dir("jax"), custom, "--input", str(trained.data),
                                 "--output", str(out)])
    assert result.exit_code == 2, result.output
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: "), result.stderr
    for needle in (f"job dir {custom} (trained under jax) does not load under tensorflow",
                   "layer Doubling ('doubling')", "register the layer"):
        assert needle in result.stderr, result.stderr
    assert list(tmp_path.iterdir()) == []  # no partial CSV, no temporary file beside it


def test_a_member_trained_under_tensorflow_predicts_the_same_under_jax_without_tensorflow(trained, tmp_path):
    out = tmp_path / "p.npz"
    cli = ("import atexit, sys; atexit.register(lambda: print('tensorflow imported:', 'tensorflow' in sys.modules)); "
           "from mlsubmit.cli import main; sys.argv[0] = 'mlsubmit'; main()")
    run = subprocess.run([sys.executable, "-c", cli, "predict", trained.job_dir("tensorflow"), "--input",
                          str(trained.data), "--output", str(out), "--backend", "jax"],
                         cwd=ROOT, env=_env(KERAS_BACKEND="torch", COLUMNS="200"), capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    saved = _npz(out)
    np.testing.assert_allclose(saved["probabilities"], trained.own_predictions("tensorflow"), rtol=0, atol=1e-5)
    assert str(saved["backend"]) == "jax" and saved["member_backends"].tolist() == ["tensorflow"]
    assert "predicted under jax " in run.stdout  # the flag wins over $KERAS_BACKEND
    assert "tensorflow imported: False" in run.stdout  # the member loads in JAX alone


def test_the_fix_it_names_works_predicting_from_python_with_the_training_code_imported(trained):
    """The hint's way out: import the code that registers the layer, then predict through the library (done in the
    JAX member's training process, JAX_PROCESS, after it trained)."""
    error = trained.root / f"{FIXED}.error"
    assert not error.exists(), error.read_text()[-3000:]
    np.testing.assert_allclose(_npz(trained.root / FIXED)["probabilities"], trained.own_predictions(CUSTOM),
                               rtol=0, atol=1e-5)


def _with_config(job_dir: Path, target: Path, change) -> Path:
    """A copy of `job_dir` whose model.keras has config.json changed by `change`, published again."""
    staging = target.parent / f".{target.name}.staging"
    shutil.copytree(job_dir, staging, ignore=shutil.ignore_patterns("MANIFEST.json"))
    archive = staging / "model" / "model.keras"
    with zipfile.ZipFile(archive) as zf:
        files = {name: zf.read(name) for name in zf.namelist()}
    config = json.loads(files["config.json"])
    change(config)
    files["config.json"] = json.dumps(config).encode()
    with zipfile.ZipFile(archive, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    publish_dir(staging, str(target))
    return target


def test_a_built_in_layer_that_fails_to_rebuild_is_named_with_the_backend_it_was_trained_under(trained, tmp_path):
    """A built-in layer whose saved config this Keras cannot take (here an argument it does not know, as a layer
    relying on another backend's op or version would fail): named from the config Keras quotes, with the fix."""
    def unknown_argument(config):
        dense = next(layer for layer in config["config"]["layers"] if layer["class_name"] == "Dense")
        dense["config"]["only_elsewhere"] = 1

    job_dir = str(_with_config(Path(trained.job_dir("jax")), tmp_path / "changed", unknown_argument))
    result = runner.invoke(app, ["predict", job_dir, "--input", str(trained.data)])
    refused(result, f"job dir {job_dir} (trained under jax) does not load under tensorflow: layer Dense ('dense')",
             "only_elsewhere", "predict with --backend jax, the backend it was trained under")


# -- choosing the backend: one line, exit 2, before any model is read ----------------------------------------------
def test_an_unknown_backend_is_refused_by_flag_and_by_environment(tmp_path, monkeypatch):
    model = tmp_path / "m.keras"
    model.write_bytes(b"never read")
    refused(runner.invoke(app, ["predict", str(model), "-i", "x.npy", "--backend", "jx"]),
             "--backend: received 'jx'", "tensorflow, jax, torch", "did you mean 'jax'?")
    monkeypatch.setenv("KERAS_BACKEND", "numpy")
    refused(runner.invoke(app, ["predict", str(model), "-i", "x.npy"]), "KERAS_BACKEND: received 'numpy'")


@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_a_backend_that_is_not_installed_names_the_extra(tmp_path, backend):
    model = tmp_path / "m.keras"
    model.write_bytes(b"never read")
    absent = (f"import sys; sys.modules[{backend!r}] = None; "  # how Python reports a package that is not there
              "from mlsubmit.cli import main; sys.argv[0] = 'mlsubmit'; main()")
    run = subprocess.run([sys.executable, "-c", absent, "predict", str(model), "-i", "x.npy", "--backend", backend],
                         cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and run.stderr.count("\n") == 1, run.stderr
    assert f"{backend} is not installed; pip install 'mlsubmit[{backend}]'" in run.stderr, run.stderr


def test_a_process_whose_keras_runs_another_backend_says_so(trained):
    import keras  # this process's Keras: imported under $KERAS_BACKEND, tensorflow unless set

    current = keras.backend.backend()
    other = "jax" if current != "jax" else "torch"
    refused(runner.invoke(app, ["predict", trained.job_dir("jax"), "-i", str(trained.data), "--backend", other]),
             f"Keras is already imported in this process under {current}", "fresh process")
