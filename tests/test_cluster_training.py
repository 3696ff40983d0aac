"""The trainer as a cluster: real processes on 127.0.0.1, each with its own TF_CONFIG, real TensorFlow, tiny runs."""

from __future__ import annotations

import re

import pytest

from tests.support.cluster_procs import start_cluster, wait_all
from tests.support.trainer_run import read_json
from tests.test_trainer_training import _manifest_ok

pytestmark = pytest.mark.slow

TINY = ["--data", "synthetic:8x8x1:4:256", "--batch-size", "16", "--steps-per-epoch", "3"]


def _digests(replicas) -> dict[str, str]:
    return {r.name: re.search(r"weights sha256 ([0-9a-f]{64})", r.output).group(1) for r in replicas
            if "weights sha256" in r.output}


def test_chief_named_master_and_a_worker_train_in_sync_and_the_evaluator_follows(tmp_path):
    job = tmp_path / "job"
    replicas = start_cluster({"chief": 1, "worker": 1}, ["--job-dir", str(job), "--epochs", "2", *TINY],
                             tmp_path / "logs", chief_key="master", evaluators=1)
    codes = wait_all(replicas, timeout=150)
    assert codes == {"master-0": 0, "worker-0": 0, "evaluator-0": 0}, [r.output[-1500:] for r in replicas]
    digests = _digests(replicas)
    assert set(digests) == {"master-0", "worker-0"} and len(set(digests.values())) == 1  # bit-identical weights

    manifest = _manifest_ok(job)
    assert sorted(p.name for p in job.iterdir()) == ["MANIFEST.json", "evaluation", "history.json", "history.png",
                                                     "logs", "metrics.json", "model"]
    assert max(p.stat().st_mtime for p in job.rglob("*") if p.is_file() and "evaluation" not in p.parts) == \
        (job / "MANIFEST.json").stat().st_mtime  # written last
    assert not [p for p in tmp_path.rglob("workertemp_*")]  # the worker cleaned up its temporary copies
    metrics = read_json(job / "metrics.json")
    assert metrics["cluster"] == {"chief": 1, "worker": 1, "evaluator": 1}
    assert (metrics["strategy"], metrics["replicas"], metrics["weights_sha256"]) == (
        "multi_worker_mirrored", 2, digests["master-0"])
    assert len(manifest["files"]) >= 7

    evaluator = replicas[-1].output
    assert "epoch 1: validation loss" in evaluator and "epoch 2: validation loss" in evaluator
    assert "training has ended; evaluated 2 checkpoint(s)" in evaluator
    last = read_json(job / "evaluation" / "evaluator-0.json")[-1]
    assert last["epoch"] == 2 and last["loss"] == pytest.approx(metrics["validation_loss"], abs=1e-5)

    import keras  # the artifacts of a tf_keras cluster job load in Keras 3, as `mlsubmit predict` loads them

    assert keras.models.load_model(job / "model" / "model.keras").count_params() == metrics["parameters"]


def test_parameter_server_training_finishes_exports_and_the_servers_exit_after_the_chief(tmp_path):
    job = tmp_path / "job"
    replicas = start_cluster({"chief": 1, "worker": 2, "ps": 1}, ["--job-dir", str(job), "--epochs", "1", *TINY],
                             tmp_path / "logs")
    codes = wait_all(replicas, timeout=150)
    assert codes == {"chief-0": 0, "worker-0": 0, "worker-1": 0, "ps-0": 0}, [r.output[-1500:] for r in replicas]
    _manifest_ok(job)
    metrics = read_json(job / "metrics.json")
    assert (metrics["strategy"], metrics["cluster"]) == ("parameter_server", {"chief": 1, "worker": 2, "ps": 1})
    for replica in replicas[1:]:
        assert "is gone; exiting" in replica.output
