"""Pure parts of cluster training: which route and strategy a role gets, when servers stop, what an evaluator reads."""

from __future__ import annotations

import json

import numpy as np
import pytest

from trainer import strategy
from trainer.cluster import Cluster, from_environment
from trainer.cluster_train import DONE_MARKER, weights_digest
from trainer.errors import TrainerError
from trainer.evaluator import pending_checkpoints, training_done
from trainer.ps_server import chief_address, watch_chief

PS_CLUSTER = {"chief": ("h:1",), "worker": ("h:2", "h:3"), "ps": ("h:4",)}


@pytest.mark.parametrize("cluster, route", [
    (Cluster(), False),
    (Cluster({"chief": ("h:1",)}), False),
    (Cluster({"chief": ("h:1",), "worker": ("h:2",)}), True),
    (Cluster({"chief": ("h:1",)}, evaluators=1), True),  # the chief writes checkpoints for its evaluator
    (Cluster({"chief": ("h:1",)}, task_type="evaluator"), True),
])
def test_cluster_route_only_where_keras_3_cannot_serve(cluster, route):
    assert strategy.uses_cluster_route(cluster) is route


@pytest.mark.parametrize("role", ["chief", "worker", "ps"])
def test_every_role_of_a_parameter_server_cluster_picks_parameter_server_training(role):
    choice = strategy.choose(Cluster(PS_CLUSTER, task_type=role), 1)
    assert choice.name == strategy.PARAMETER_SERVER and choice.needs_legacy_keras


def test_parameter_servers_need_workers_and_a_chief():
    with pytest.raises(TrainerError, match="no workers.*--workers N"):
        strategy.choose(Cluster({"chief": ("h:1",), "ps": ("h:2",)}), 1)
    with pytest.raises(TrainerError, match="no chief"):
        strategy.choose(Cluster({"worker": ("h:1",), "ps": ("h:2",)}, task_type="worker"), 1)


def test_evaluators_are_counted_from_cluster_spec_but_kept_out_of_the_tensorflow_cluster():
    tf_config = {"cluster": {"chief": ["h:1"], "worker": ["h:2"]}, "task": {"type": "chief", "index": 0}}
    spec = {"cluster": {"workerpool0": ["h:1"], "workerpool1": ["h:2"], "workerpool3": ["h:3"]},
            "task": {"type": "workerpool0", "index": 0}}
    cluster = from_environment({"TF_CONFIG": json.dumps(tf_config), "CLUSTER_SPEC": json.dumps(spec)})
    assert cluster.evaluators == 1 and "evaluator" not in cluster.tf_config()["cluster"]
    assert cluster.shape() == {"chief": 1, "worker": 1, "evaluator": 1}
    with pytest.raises(TrainerError, match="2 chiefs"):
        from_environment({"TF_CONFIG": json.dumps({"cluster": {"chief": ["a:1", "b:1"]}, "task": {}})})


def test_servers_stop_once_the_chief_they_saw_is_gone(monkeypatch):
    answers = iter([False, False, True, True, False, False, False, False])  # not up yet, up, then gone
    clock = iter(range(100))
    monkeypatch.setattr("time.sleep", lambda seconds: None)
    monkeypatch.setattr("time.monotonic", lambda: next(clock))
    reason = watch_chief(("127.0.0.1", 5), gone_after=2, probe=lambda address: next(answers))
    assert reason == "the chief at 127.0.0.1:5 is gone"
    assert chief_address(Cluster(PS_CLUSTER, task_type="ps")) == ("h", 1)


def test_evaluator_takes_complete_checkpoints_in_epoch_order_and_this_jobs_marker(tmp_path):
    for name in ("ckpt-0002.index", "ckpt-0001.index", "ckpt-0003.data-00000-of-00001", "checkpoint"):
        (tmp_path / name).write_text("")
    assert [epoch for epoch, _ in pending_checkpoints(tmp_path, set())] == [1, 2]  # 3 has no index yet
    assert pending_checkpoints(tmp_path, {1}) == [(2, str(tmp_path / "ckpt-0002"))]
    assert not training_done(tmp_path, "job_1")
    (tmp_path / DONE_MARKER).write_text(json.dumps({"job_id": "job_0"}))
    assert not training_done(tmp_path, "job_1") and training_done(tmp_path, "job_0") and training_done(tmp_path, "")


def test_weights_digest_tells_bit_identical_models_apart():
    weights = [np.ones((2, 2), np.float32), np.zeros(3, np.float32)]
    assert weights_digest(weights) == weights_digest([w.copy() for w in weights])
    weights[1][0] = np.nextafter(np.float32(0), np.float32(1))
    assert weights_digest(weights) != weights_digest([np.ones((2, 2), np.float32), np.zeros(3, np.float32)])


def test_a_non_chief_writes_nothing_where_the_chief_cleans_up_and_resumes_from_a_copy_of_its_backup(tmp_path):
    from trainer.cluster_train import _places
    from trainer.config import parse_config
    from mlsubmit_runtime.storage import Location

    job_dir = tmp_path / "job"
    (job_dir / "backup" / "chief").mkdir(parents=True)
    (job_dir / "backup" / "chief" / "checkpoint").write_text("epoch 3")
    (job_dir / "backup" / "workertemp_1").mkdir()  # a worker's leftover from a crashed run
    config = parse_config(["--job-dir", str(job_dir)], env={})
    shape = {"chief": ("h:1",), "worker": ("h:2",)}
    for role in ("chief", "worker"):
        private = tmp_path / f"private-{role}"
        private.mkdir()
        places = _places(config, Location(str(job_dir)), Cluster(shape, task_type=role, evaluators=1), private)
        under = {place.local.resolve().is_relative_to(job_dir) for place in places}
        if role == "chief":
            assert under == {True}
        else:  # on one machine the replicas share the job dir: the chief removes backup/ while a worker saves
            assert under == {False} and all(place.local.is_relative_to(private) for place in places)
            copied = places[0].local
            assert (copied / "chief" / "checkpoint").read_text() == "epoch 3"
            assert not (copied / "workertemp_1").exists()
