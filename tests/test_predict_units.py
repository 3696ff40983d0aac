"""mlsubmit predict without TensorFlow: the combination, flags, inputs, outputs, manifests and the download cache.

Real files, a real fake-gcs-server; no model is loaded here (tests/test_predict_ensemble.py does that).
"""

from __future__ import annotations

import csv
import json
import re
import tracemalloc
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from mlsubmit.cli import app
from mlsubmit.errors import UsageError
from mlsubmit.predict import combine
from mlsubmit.predict.cache import Cache
from mlsubmit.predict.inputs import load_labels, open_input
from mlsubmit.predict.outputs import PredictionWriter
from mlsubmit.predict.request import make_request
from mlsubmit.predict.sources import resolve
from mlsubmit_runtime.artifacts import build_manifest, write_json
from mlsubmit_runtime.features import features

runner = CliRunner()


@contextmanager
def refused(pattern: str):
    """Expect a UsageError whose one-line message (with its hint) matches `pattern`."""
    with pytest.raises(UsageError) as info:
        yield
    assert re.search(pattern, info.value.one_line()), info.value.one_line()


# -- combine ----------------------------------------------------------------------------------------------------
def test_combine_is_the_weighted_mean_and_rows_still_sum_to_one():
    rng = np.random.default_rng(0)
    members = [rng.dirichlet(np.ones(4), size=6) for _ in range(3)]
    weights = [0.9, 0.5, 0.7]
    expected = sum(w * p for w, p in zip(weights, members)) / sum(weights)
    combined = combine(members, weights)
    np.testing.assert_allclose(combined, expected, rtol=0, atol=1e-15)
    np.testing.assert_allclose(combined.sum(axis=1), 1.0, atol=1e-12)
    np.testing.assert_array_equal(combine(members, [0, 1, 0]), members[1])  # weight 0 leaves a member out
    assert combine([np.array([[0.9, 0.1]]), np.array([[0.5, 0.5]])], [0.75, 0.25]).tolist() == [[0.8, 0.2]]


@pytest.mark.parametrize("weights, needle", [([1, 1], "3 weights"), ([1, -1, 1], "-1 is not"),
                                             ([0, 0, 0], "all zero"), ([1, float("nan"), 1], "nan is not")])
def test_combine_rejects_bad_weights(weights, needle):
    members = [np.full((2, 3), 1 / 3)] * 3
    with refused(needle):
        combine(members, weights)


def test_combine_rejects_members_of_different_shapes():
    with refused("differ in shape"):
        combine([np.ones((2, 3)) / 3, np.ones((2, 4)) / 4], [1, 1])


# -- flags --------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("args, needle", [
    (["--weights", "0.5,0.5"], "expected 3 weights, one per model (got 2)"),
    (["--weights", "1,-0.5,1"], "-0.5 is not"),
    (["--weights", "0,0,0"], "all zero"),
    (["--weights", "acuracy"], "did you mean 'accuracy'"),
    (["--batch-size", "0"], "--batch-size: received '0'"),
    (["--batch-size", "many"], "--batch-size: received 'many'"),
    (["--output", "out.txt"], "a file ending in .csv, .npz, .json"),
    (["--output", "no/such/dir/out.csv"], "existing directory"),
])
def test_bad_flags_exit_2_with_one_line_and_write_nothing(tmp_path, monkeypatch, args, needle):
    monkeypatch.chdir(tmp_path)
    for name in ("a", "b", "c"):
        (tmp_path / name).mkdir()
    np.savez(tmp_path / "x.npz", x_test=np.zeros((2, 8, 8), np.uint8))
    result = runner.invoke(app, ["predict", "a", "b", "c", "--input", "x.npz", *args])
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: ") and needle in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b", "c", "x.npz"]


def test_a_missing_model_is_named():
    with refused("received 'nowhere/job'"):
        make_request(["nowhere/job"], "x.npz")


# -- inputs -------------------------------------------------------------------------------------------------------
def _batches(source, size, shape):
    return list(source.batches(size, shape))


@pytest.mark.parametrize("saver", [np.savez, np.savez_compressed])
def test_npz_batches_match_the_trainers_preprocessing(tmp_path, saver):
    x = np.random.default_rng(1).integers(0, 256, size=(23, 8, 8), dtype=np.uint8)
    saver(tmp_path / "d.npz", x_test=x, other=np.zeros((3, 64), np.float64))
    source = open_input((str(tmp_path / "d.npz"),), None)
    assert (source.count, source.sample_shape) == (23, (8, 8, 1))
    batches = _batches(source, 5, (8, 8, 1))
    assert [len(b) for b in batches] == [5, 5, 5, 5, 3]
    np.testing.assert_array_equal(np.concatenate(batches), features(x, "x_test"))
    other = open_input((str(tmp_path / "d.npz"),), "other")
    assert other.sample_shape == (64,) and np.concatenate(_batches(other, 2, (64,))).dtype == np.float32


def test_npy_and_fortran_order(tmp_path):
    x = np.asfortranarray(np.random.default_rng(2).normal(size=(7, 4, 4, 3)))
    np.save(tmp_path / "f.npy", x)
    source = open_input((str(tmp_path / "f.npy"),), None)
    np.testing.assert_allclose(np.concatenate(_batches(source, 3, (4, 4, 3))), x.astype(np.float32))


def test_memory_is_bounded_by_the_batch_not_the_input(tmp_path):
    x = np.random.default_rng(3).integers(0, 256, size=(10_000, 32, 32), dtype=np.uint8)  # 10 MB; as float32 40 MB
    np.savez_compressed(tmp_path / "big.npz", x_test=x)
    del x
    source = open_input((str(tmp_path / "big.npz"),), None)
    tracemalloc.start()
    rows = sum(len(b) for b in source.batches(100, (32, 32, 1)))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert rows == 10_000
    assert peak < 3_000_000, f"peak {peak / 1e6:.1f} MB while streaming a 10 MB input in batches of 100 rows"


@pytest.mark.parametrize("array, needle", [
    (np.array([["a", "b"], ["c", "d"]]), "dtype <U1"),
    (np.ones((3, 4), dtype=np.complex64), "dtype complex64"),
    (np.ones((3, 4), dtype=bool), "dtype bool"),
    (np.ones(5, dtype=np.float32), "shape (5,)"),
])
def test_unusable_arrays_are_refused_from_the_header(tmp_path, array, needle):
    np.savez(tmp_path / "bad.npz", x_test=array)
    with pytest.raises(UsageError) as info:
        open_input((str(tmp_path / "bad.npz"),), None)
    assert needle in str(info.value)


def test_wrong_shape_and_missing_key_are_one_clear_line(tmp_path):
    np.savez(tmp_path / "d.npz", x_test=np.zeros((4, 4, 4), np.uint8), y_test=np.zeros(4))
    source = open_input((str(tmp_path / "d.npz"),), None)
    with refused(r"samples of shape \(4, 4, 1\); the models expect \(8, 8, 1\)"):
        source.check((8, 8, 1))
    with refused("did you mean 'x_test'"):
        open_input((str(tmp_path / "d.npz"),), "x_tset")


def test_images_are_converted_and_resized_to_the_model_input(tmp_path):
    from PIL import Image

    for i, colour in enumerate([(255, 255, 255), (0, 0, 0)]):
        Image.new("RGB", (20, 10), colour).save(tmp_path / f"img{i}.png")
    source = open_input((str(tmp_path / "img*.png"),), None)
    assert source.ids == [str(tmp_path / "img0.png"), str(tmp_path / "img1.png")]
    grey = np.concatenate(_batches(source, 8, (8, 8, 1)))
    assert grey.shape == (2, 8, 8, 1) and grey.dtype == np.float32
    np.testing.assert_allclose(grey[0], 1.0) and np.testing.assert_allclose(grey[1], 0.0)
    assert np.concatenate(_batches(source, 1, (5, 6, 3))).shape == (2, 5, 6, 3)
    with refused("matches image files"):
        open_input((str(tmp_path / "none*.png"),), None)


def test_labels_from_a_key_or_a_file_and_their_count(tmp_path):
    np.savez(tmp_path / "d.npz", x_test=np.zeros((3, 8, 8), np.uint8), y_test=np.array([0, 2, 1]))
    source = open_input((str(tmp_path / "d.npz"),), None)
    assert load_labels("y_test", source)[0].tolist() == [0, 2, 1]
    np.save(tmp_path / "onehot.npy", np.eye(3)[[1, 1, 0]])
    assert load_labels(str(tmp_path / "onehot.npy"), source)[0].tolist() == [1, 1, 0]
    np.save(tmp_path / "short.npy", np.array([1, 2]))
    with refused(r"one label per input row \(3\); it has 2"):
        load_labels(str(tmp_path / "short.npy"), source)
    with refused("did you mean 'y_test'"):
        load_labels("y_tets", source)


# -- outputs ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("suffix", [".csv", ".npz", ".json"])
def test_outputs_hold_every_row_and_appear_only_on_commit(tmp_path, suffix):
    rng = np.random.default_rng(4)
    probabilities = rng.dirichlet(np.ones(3), size=7)
    out = tmp_path / f"p{suffix}"
    writer = PredictionWriter(out, rows=7, classes=3, ids=None, with_labels=True, members=["a"], weights=[1.0])
    writer.add(0, probabilities[:4], np.array([0, 1, 2, 0]))
    writer.add(4, probabilities[4:], np.array([1, 1, 1]))
    assert not out.exists()
    writer.commit()
    assert [p.name for p in tmp_path.iterdir()] == [out.name]  # no temporary files left
    if suffix == ".csv":
        rows = list(csv.DictReader(out.open()))
        got = np.array([[float(r[f"prob_{c}"]) for c in range(3)] for r in rows])
        assert rows[0]["row"] == "0" and rows[6]["label"] == "1"
    elif suffix == ".npz":
        with np.load(out) as data:
            got = data["probabilities"]
            assert data["predicted"].tolist() == probabilities.argmax(axis=1).tolist()
    else:
        document = json.loads(out.read_text())
        got = np.array([r["probabilities"] for r in document["rows"]])
        assert document["members"] == ["a"]
    np.testing.assert_array_equal(got, probabilities)  # exact: floats round-trip


def test_an_aborted_writer_leaves_nothing(tmp_path):
    out = tmp_path / "p.csv"
    with pytest.raises(RuntimeError):
        with PredictionWriter(out, rows=2, classes=2, ids=None, with_labels=False, members=["a"], weights=[1]) as w:
            w.add(0, np.array([[0.5, 0.5]]))
            raise RuntimeError("disk gone")
    assert list(tmp_path.iterdir()) == []


# -- manifests and the cache --------------------------------------------------------------------------------------
def _fake_job_dir(root: Path) -> Path:
    """A job dir shaped like the trainer's (the model bytes are not a real model: nothing is loaded here)."""
    (root / "model").mkdir(parents=True)
    (root / "model" / "model.keras").write_bytes(b"keras-bytes" * 100)
    (root / "model" / "model.h5").write_bytes(b"h5-bytes" * 100)
    write_json(root / "metrics.json", {"validation_accuracy": 0.9, "test_accuracy": 0.8})
    files = sorted(p for p in root.rglob("*") if p.is_file())
    write_json(root / "MANIFEST.json", build_manifest(root, files))
    return root


def test_local_job_dir_is_verified_against_its_manifest(tmp_path):
    job = _fake_job_dir(tmp_path / "job")
    found = resolve(str(job), Cache(tmp_path / "cache"))
    assert found.model_file == job / "model" / "model.keras" and found.metrics["validation_accuracy"] == 0.9
    (job / "model" / "model.h5").write_bytes(b"H5-bytes" * 100)  # same size, other bytes
    with refused(r"is corrupt: model/model.h5 has sha256 .* but MANIFEST.json lists"):
        resolve(str(job), Cache(tmp_path / "cache"))
    (job / "model" / "model.h5").unlink()
    with refused("is incomplete: model/model.h5 is listed in MANIFEST.json but missing"):
        resolve(str(job), Cache(tmp_path / "cache"))
    (job / "MANIFEST.json").unlink()
    with refused("is incomplete: no MANIFEST.json"):
        resolve(str(job), Cache(tmp_path / "cache"))


def _upload(bucket, local: Path, prefix: str) -> None:
    for path in sorted(p for p in local.rglob("*") if p.is_file()):
        bucket.blob(f"{prefix}/{path.relative_to(local).as_posix()}").upload_from_filename(str(path))


def test_gcs_job_dir_is_downloaded_once_and_a_later_change_in_the_bucket_is_caught(gcs, tmp_path):
    from mlsubmit.emulator.gcs_emulator import storage_client

    _, bucket_name = gcs
    bucket = storage_client().bucket(bucket_name)
    _upload(bucket, _fake_job_dir(tmp_path / "job"), "runs/one")
    uri = f"gs://{bucket_name}/runs/one"
    first = Cache(tmp_path / "cache")
    found = resolve(uri, first)
    assert len(first.downloaded) == 3 and not first.reused  # every file MANIFEST.json lists
    assert found.model_file.read_bytes() == b"keras-bytes" * 100 and found.metrics["test_accuracy"] == 0.8
    manifest = json.loads((tmp_path / "job" / "MANIFEST.json").read_text())
    keras_sha = next(f["sha256"] for f in manifest["files"] if f["path"] == "model/model.keras")
    assert found.model_file == tmp_path / "cache" / "sha256" / keras_sha[:2] / f"{keras_sha}.keras"

    second = Cache(tmp_path / "cache")
    resolve(uri, second)
    assert second.downloaded == [] and len(second.reused) == 3

    bucket.blob("runs/one/model/model.keras").upload_from_string(b"KERAS-bytes" * 100)  # tampered after caching
    with refused("is corrupt: model/model.keras in the bucket differs"):
        resolve(uri, Cache(tmp_path / "cache"))
    bucket.blob("runs/one/MANIFEST.json").delete()
    with refused(r"is incomplete: no MANIFEST.json \(3 file\(s\) there\)"):
        resolve(uri, Cache(tmp_path / "cache"))
    with refused("incomplete: no MANIFEST.json .the prefix is empty"):
        resolve(f"gs://{bucket_name}/runs/none", Cache(tmp_path / "cache"))


def test_a_tampered_download_never_enters_the_cache(gcs, tmp_path):
    from mlsubmit.emulator.gcs_emulator import storage_client

    _, bucket_name = gcs
    bucket = storage_client().bucket(bucket_name)
    job = _fake_job_dir(tmp_path / "job")
    (job / "model" / "model.h5").write_bytes(b"h5-BYTES" * 100)  # after the manifest was written
    _upload(bucket, job, "runs/two")
    with refused("is corrupt: model/model.h5 has sha256"):
        resolve(f"gs://{bucket_name}/runs/two", Cache(tmp_path / "cache"))
    cached = [p.read_bytes() for p in (tmp_path / "cache").rglob("*") if p.is_file()]
    assert b"h5-BYTES" * 100 not in cached and not list((tmp_path / "cache" / "tmp").iterdir())


def test_bare_gcs_model_file_is_cached_by_its_md5(gcs, tmp_path):
    from mlsubmit.emulator.gcs_emulator import storage_client

    _, bucket_name = gcs
    storage_client().bucket(bucket_name).blob("models/m.keras").upload_from_string(b"model" * 50)
    first, second = Cache(tmp_path / "cache"), Cache(tmp_path / "cache")
    path = resolve(f"gs://{bucket_name}/models/m.keras", first).model_file
    again = resolve(f"gs://{bucket_name}/models/m.keras", second)
    assert path.suffix == ".keras" and path.parent.parent.name == "md5" and path.read_bytes() == b"model" * 50
    assert (len(first.downloaded), second.downloaded, again.model_file) == (1, [], path)
    with refused("received 'gs://.*/models/absent.keras'; expected an existing gs:// object"):
        resolve(f"gs://{bucket_name}/models/absent.keras", Cache(tmp_path / "cache"))
    with refused("bucket gs://no-such-bucket does not exist"):
        resolve("gs://no-such-bucket/runs/one", Cache(tmp_path / "cache"))


def test_auto_batch_size_keeps_a_batch_of_large_images_small():
    from mlsubmit.predict.request import auto_batch_size

    assert auto_batch_size((8, 8, 1)) == 1024  # small rows: the row cap
    assert auto_batch_size((224, 224, 3)) == 55  # 602 kB of float32 a row: 32 MB a batch
    assert make_request(["."], "x.npz", batch_size="auto").batch_size is None


def test_accuracy_weights_come_from_validation_else_test_accuracy():
    from mlsubmit.predict.ensemble import MemberWeight, member_weights
    from mlsubmit.predict.request import WeightSpec
    from mlsubmit.predict.sources import ModelSource

    with_val = ModelSource("a", Path("a"), {"validation_accuracy": 0.9, "test_accuracy": 0.8}, "job dir")
    no_val = ModelSource("b", Path("b"), {"validation_accuracy": None, "test_accuracy": 0.7}, "job dir")
    bare = ModelSource("c.keras", Path("c.keras"), None, "model file")
    assert member_weights(WeightSpec("accuracy"), [with_val, no_val]) == [
        MemberWeight(0.9, "validation accuracy"), MemberWeight(0.7, "test accuracy")]
    assert member_weights(WeightSpec("accuracy"), [bare]) == [MemberWeight(1.0, "only model")]
    assert member_weights(WeightSpec("equal"), [with_val, bare])[1] == MemberWeight(1.0, "equal")
    with refused("c.keras is a bare model file without the trainer's metrics.json; pass a job dir, --weights equal"):
        member_weights(WeightSpec("accuracy"), [with_val, bare])


# -- bounded by what a job dir declares ---------------------------------------------------------------------------
def test_a_manifest_too_large_is_refused_without_reading_it(tmp_path):
    job = _fake_job_dir(tmp_path / "job")
    with open(job / "MANIFEST.json", "r+b") as manifest:
        manifest.truncate(20 << 20)  # sparse: 20 MiB that cost no disk
    tracemalloc.start()
    try:
        with refused(r"is corrupt: MANIFEST.json has 20,971,520 bytes; expected at most 16,777,216 \(16 MiB\), as a "
                     r"trainer writes it \(a few KB\)"):
            resolve(str(job), Cache(tmp_path / "cache"))
        assert tracemalloc.get_traced_memory()[1] < 1 << 20  # never read
    finally:
        tracemalloc.stop()


def test_a_manifest_listing_too_many_files_is_corrupt(tmp_path):
    job = _fake_job_dir(tmp_path / "job")
    manifest = json.loads((job / "MANIFEST.json").read_text())
    manifest["files"] += [{"path": f"f{i}", "size": 0, "sha256": "0" * 64} for i in range(10_000)]
    write_json(job / "MANIFEST.json", manifest)
    with refused(r"is corrupt: MANIFEST.json cannot be read \(it lists 10,003 files; expected at most 10,000\)"):
        resolve(str(job), Cache(tmp_path / "cache"))


def test_a_job_dir_that_cannot_fit_in_the_cache_downloads_nothing(tmp_path):
    import shutil

    from mlsubmit.predict.sources import Entry, _check_space

    cache = Cache(tmp_path / "cache")
    free = shutil.disk_usage(tmp_path).free
    entries = [Entry("model/model.keras", free, "a" * 64), Entry("model/model.h5", 1 << 20, "b" * 64)]
    with refused(rf"job dir gs://b/run lists [\d,]+ bytes to download; the cache at {re.escape(str(cache.root))} "
                 r"has [\d,]+ bytes free; free some space, or set MLSUBMIT_HOME to a larger disk"):
        _check_space("gs://b/run", cache, entries)
    _check_space("gs://b/run", cache, entries[1:])  # 1 MiB fits


def test_a_gcs_listing_keeps_only_what_it_needs(gcs, tmp_path):
    """A prefix of millions of objects (a bucket's root by mistake) is never held whole: the manifest's files, the
    listing ending once all are found; else the first `most` + 1 (enough to say "more than")."""
    from mlsubmit.emulator.gcs_emulator import storage_client
    from mlsubmit.predict.sources import _listing

    _, bucket_name = gcs
    _upload(storage_client().bucket(bucket_name), _fake_job_dir(tmp_path / "job"), "runs/listed")
    uri = f"gs://{bucket_name}/runs/listed"
    assert list(_listing(uri, {"metrics.json"})) == ["metrics.json"]
    assert len(_listing(uri, most=1)) == 2 and len(_listing(uri)) == 4  # MANIFEST.json and three files
