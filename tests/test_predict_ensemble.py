"""mlsubmit predict end to end: three models trained by the trainer on the digits, read back from gs://.

The models are trained once per session by the trainer (one after another in one subprocess: one TensorFlow start
for the three) into a bucket on a real fake-gcs-server; the command runs in-process through typer's CliRunner so
TensorFlow is imported once.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from mlsubmit.cli import app
from tests.support.one_line import refused
from tests.support.trainer_run import ROOT, digits_npz

SEEDS = (1, 2, 3)
EPOCHS = 3
runner = CliRunner()
pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class Trained:
    data: Path
    bucket: str
    job_dirs: list[str]


# The trainer's own entry point (what `python -m trainer.task` calls), once per member: argv[1] is a JSON list of
# each member's flags.
TRAIN_EACH = """
import json, sys
from trainer.task import main
for flags in json.loads(sys.argv[1]):
    assert main(flags) == 0, flags
"""


@pytest.fixture(scope="session")
def trained(gcs_emulator, tmp_path_factory) -> Trained:
    """Three `dense` models on the digits, seeds 1–3, trained into gs://predict-models/digits/seedN."""
    root = tmp_path_factory.mktemp("predict-models")
    data = digits_npz(root / "digits.npz")
    bucket = "predict-models"
    gcs_emulator.create_bucket(bucket)
    env = {**os.environ, **gcs_emulator.env(), "TF_CPP_MIN_LOG_LEVEL": "3", "MLSUBMIT_HOME": str(root / "home")}
    job_dirs = [f"gs://{bucket}/digits/seed{seed}" for seed in SEEDS]
    members = [["--job-dir", job_dir, "--model", "dense", "--data", str(data), "--epochs", str(EPOCHS), "--seed",
                str(seed)] for seed, job_dir in zip(SEEDS, job_dirs)]
    run = subprocess.run([sys.executable, "-c", TRAIN_EACH, json.dumps(members)], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=400)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    return Trained(data, bucket, job_dirs)


@pytest.fixture
def wide(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # rich tables: whole gs:// names, no wrapping


def _predict(*args: str):
    result = runner.invoke(app, ["predict", *args])
    return result


def _bucket():
    from mlsubmit.emulator.gcs_emulator import storage_client

    return storage_client().bucket("predict-models")


def _download(job_dir: str, rel: str, target: Path) -> Path:
    name = job_dir.split("/", 3)[3] + "/" + rel
    target.parent.mkdir(parents=True, exist_ok=True)
    _bucket().blob(name).download_to_filename(str(target))
    return target


def _expected(trained: Trained, tmp_path: Path):
    """The ensemble computed independently: each model's own predictions, weighted by its recorded accuracy."""
    import keras

    with np.load(trained.data) as data:
        x, y = data["x_test"].astype(np.float32)[..., None] / 255.0, data["y_test"]
    members, weights = [], []
    for i, job_dir in enumerate(trained.job_dirs):
        model = keras.models.load_model(_download(job_dir, "model/model.keras", tmp_path / f"m{i}.keras"))
        members.append(model.predict(x, verbose=0).astype(np.float64))
        metrics = json.loads(_download(job_dir, "metrics.json", tmp_path / f"metrics{i}.json").read_text())
        weights.append(metrics["validation_accuracy"])
    ensemble = sum(w * p for w, p in zip(weights, members)) / sum(weights)
    return members, weights, ensemble, y


def test_ensemble_from_gcs_reports_each_member_and_equals_the_weighted_formula(trained, gcs, wide, tmp_path):
    out = tmp_path / "predictions.csv"
    result = _predict(*trained.job_dirs, "--input", str(trained.data), "--labels", "y_test", "--output", str(out))
    assert result.exit_code == 0, result.output

    members, weights, expected, y = _expected(trained, tmp_path)
    import tensorflow as tf
    table = np.genfromtxt(out, delimiter=",", names=True)
    got = np.stack([table[f"prob_{c}"] for c in range(10)], axis=1)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-5)
    assert (table["predicted"] == expected.argmax(axis=1)).mean() > 0.99  # ties within float noise may flip
    np.testing.assert_array_equal(table["label"], y)

    for job_dir, p, weight in zip(trained.job_dirs, members, weights):
        row = next(line for line in result.stdout.splitlines() if job_dir in line and "validation accuracy" in line)
        assert f"{weight:.4g}" in row and f"{(p.argmax(axis=1) == y).mean():.2%}" in row
        assert f"tensorflow {tf.__version__}" in row  # trained under: the trainer's keras_backend, tensorflow_version
    ensemble_row = next(line for line in result.stdout.splitlines() if "ensemble" in line and "Σ" in line)
    assert f"{(expected.argmax(axis=1) == y).mean():.2%}" in ensemble_row
    assert (tmp_path / "predictions.confusion.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_second_run_downloads_nothing_and_npz_output_matches(trained, gcs, wide, tmp_path):
    listed = sum(len(json.loads(_download(d, "MANIFEST.json", tmp_path / f"manifest{i}.json").read_text())["files"])
                 for i, d in enumerate(trained.job_dirs))
    first = _predict(*trained.job_dirs, "--input", str(trained.data), "--output", str(tmp_path / "a.csv"))
    assert first.exit_code == 0, first.output
    downloaded, reused = map(int, re.search(r"(\d+) file\(s\) downloaded, (\d+) reused", first.stdout).groups())
    assert downloaded + reused == listed and downloaded > listed // 2  # identical files are fetched once
    second = _predict(*trained.job_dirs, "--input", str(trained.data), "--output", str(tmp_path / "b.npz"),
                      "--batch-size", "50")
    assert second.exit_code == 0, second.output
    assert f"0 file(s) downloaded, {listed} reused" in second.stdout

    cache = Path(os.environ["MLSUBMIT_HOME"]) / "cache" / "sha256"
    manifest = json.loads((tmp_path / "manifest0.json").read_text())
    keras_sha = next(f["sha256"] for f in manifest["files"] if f["path"] == "model/model.keras")
    assert (cache / keras_sha[:2] / f"{keras_sha}.keras").is_file()
    table = np.genfromtxt(tmp_path / "a.csv", delimiter=",", names=True)
    with np.load(tmp_path / "b.npz") as saved:
        np.testing.assert_allclose(saved["probabilities"][:, 3], table["prob_3"], atol=1e-6)
        assert saved["weights"].shape == (3,) and list(saved["members"]) == trained.job_dirs


def _copy_job_dir(source: str, bucket_name: str, prefix: str) -> str:
    from mlsubmit.emulator.gcs_emulator import storage_client

    client = storage_client()
    src_prefix = source.split("/", 3)[3] + "/"
    target = client.bucket(bucket_name)
    for blob in client.list_blobs("predict-models", prefix=src_prefix):
        _bucket().copy_blob(blob, target, f"{prefix}/{blob.name[len(src_prefix):]}")
    return f"gs://{bucket_name}/{prefix}"


def test_tampered_or_incomplete_gcs_job_dir_isrefused(trained, gcs, tmp_path):
    from mlsubmit.emulator.gcs_emulator import storage_client

    _, bucket_name = gcs
    tampered = _copy_job_dir(trained.job_dirs[0], bucket_name, "tampered")
    blob = storage_client().bucket(bucket_name).blob("tampered/model/model.keras")
    content = bytearray(blob.download_as_bytes())
    content[len(content) // 2] ^= 0xFF  # one byte, same size
    blob.upload_from_string(bytes(content))
    out = tmp_path / "p.csv"
    refused(_predict(tampered, trained.job_dirs[1], "--input", str(trained.data), "-o", str(out)),
             "is corrupt", "model/model.keras", "sha256")

    incomplete = _copy_job_dir(trained.job_dirs[0], bucket_name, "incomplete")
    storage_client().bucket(bucket_name).blob("incomplete/MANIFEST.json").delete()
    refused(_predict(incomplete, "--input", str(trained.data), "-o", str(out)),
             "is incomplete: no MANIFEST.json")
    assert list(tmp_path.iterdir()) == []


@pytest.fixture(scope="module")
def small_models(tmp_path_factory) -> dict[str, Path]:
    """Bare .keras files: a Lambda model, and models that disagree with the digits models on shape or classes."""
    import keras

    root = tmp_path_factory.mktemp("small-models")

    def save(name, shape, classes, lambda_layer=False):
        inputs = keras.Input(shape)
        x = keras.layers.Flatten()(inputs)
        if lambda_layer:
            x = keras.layers.Lambda(lambda t: t * 2.0)(x)
        model = keras.Model(inputs, keras.layers.Dense(classes, activation="softmax")(x))
        model.save(root / name)
        return root / name

    return {"lambda": save("lambda.keras", (8, 8, 1), 10, True), "plain": save("plain.keras", (8, 8, 1), 10),
            "small_input": save("small_input.keras", (4, 4, 1), 10), "five": save("five.keras", (8, 8, 1), 5)}


def test_lambda_model_is_refused_without_unsafe_and_loads_with_it(small_models, trained, tmp_path):
    out = tmp_path / "p.json"
    refused(_predict(str(small_models["lambda"]), "--input", str(trained.data), "-o", str(out)),
             "Lambda layer", "arbitrary code", "--unsafe")
    assert not out.exists()
    result = _predict(str(small_models["lambda"]), "--input", str(trained.data), "-o", str(out), "--unsafe")
    assert result.exit_code == 0, result.output
    assert len(json.loads(out.read_text())["rows"]) == 360


@pytest.mark.parametrize("other, needle", [("small_input", "disagree on the input shape"),
                                           ("five", "disagree on the number of classes")])
def test_members_that_disagree_arerefused(small_models, trained, tmp_path, other, needle):
    out = tmp_path / "p.csv"
    refused(_predict(str(small_models["plain"]), str(small_models[other]), "--input", str(trained.data),
                      "--weights", "equal", "-o", str(out)), needle)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("x, needle", [(np.zeros((5, 4, 4), np.uint8), "the models expect (8, 8, 1)"),
                                       (np.zeros((5, 8, 8), np.complex64), "dtype complex64"),
                                       (np.array([["a"] * 8] * 5), "dtype <U1")])
def test_input_of_the_wrong_shape_or_dtype_isrefused(small_models, tmp_path, x, needle):
    np.savez(tmp_path / "x.npz", x_test=x)
    refused(_predict(str(small_models["plain"]), "--input", str(tmp_path / "x.npz"), "-o", str(tmp_path / "p.csv")),
             needle)
    assert [p.name for p in tmp_path.iterdir()] == ["x.npz"]


def test_accuracy_weights_need_metrics_and_a_broken_image_mid_way_leaves_no_output(small_models, tmp_path):
    from PIL import Image

    images = tmp_path / "images"
    images.mkdir()
    for i in range(3):
        Image.new("L", (8, 8), 40 * i).save(images / f"{i}.png")
    (images / "9.png").write_bytes(b"not a png")  # sorted last: fails in the last batch
    out = tmp_path / "p.csv"
    refused(_predict(str(small_models["plain"]), str(small_models["lambda"]), "--input", str(images / "*.png"),
                      "-o", str(out), "--unsafe"), "--weights accuracy needs each model's recorded accuracy")
    refused(_predict(str(small_models["plain"]), "--input", str(images / "*.png"), "-o", str(out),
                      "--batch-size", "2"), "9.png: cannot read it")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["images"]
    (images / "9.png").unlink()
    result = _predict(str(small_models["plain"]), "--input", str(images / "*.png"), "-o", str(out))
    assert result.exit_code == 0, result.output
    assert out.read_text().splitlines()[1].startswith(str(images / "0.png") + ",")


def test_a_damaged_npz_found_mid_way_leaves_no_output(small_models, tmp_path):
    path = tmp_path / "x.npz"
    np.savez_compressed(path, x_test=np.random.default_rng(0).integers(0, 256, (3000, 8, 8), dtype=np.uint8))
    damaged = bytearray(path.read_bytes())
    damaged[len(damaged) // 2] ^= 0xFF  # the zip's CRC check fails only once the member has been read
    path.write_bytes(bytes(damaged))
    refused(_predict(str(small_models["plain"]), "--input", str(path), "-o", str(tmp_path / "p.npz"),
                      "--batch-size", "100"), "the file is damaged")
    assert [p.name for p in tmp_path.iterdir()] == ["x.npz"]
