"""Pure parts of the trainer: strict flags, job dir resolution, device selection, strategy choice, data checks."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from trainer import strategy
from trainer.cluster import Cluster, from_environment
from trainer.config import parse_config
from trainer.data import prepare, synthetic
from trainer.devices import select
from trainer.errors import TrainerError


def test_unknown_flag_is_an_error_with_did_you_mean():
    with pytest.raises(TrainerError, match=r"unknown argument '--epoch'.*did you mean '--epochs'"):
        parse_config(["--job-dir", "/tmp/x", "--epoch", "3"], env={})


def test_bad_values_name_the_flag_and_what_is_allowed():
    with pytest.raises(TrainerError, match=r"--model: received 'resnet'; expected one of cifar10_vgg"):
        parse_config(["--job-dir", "/tmp/x", "--model", "resnet"], env={})
    with pytest.raises(TrainerError, match=r"--gpus: received '-1'"):
        parse_config(["--job-dir", "/tmp/x", "--gpus", "-1"], env={})
    with pytest.raises(TrainerError, match="missing --job-dir"):
        parse_config([], env={})
    for flag in ("--epochs", "--learning-rate", "--validation-split"):  # int()/float() read ٣ as 3
        with pytest.raises(TrainerError, match=f"{flag}: received '٣'"):
            parse_config(["--job-dir", "/tmp/x", flag, "٣"], env={})


def test_job_dir_comes_from_vertex_base_output_directory():
    env = {"AIP_MODEL_DIR": "gs://b/run7/model/", "AIP_CHECKPOINT_DIR": "gs://b/run7/checkpoints/",
           "AIP_TENSORBOARD_LOG_DIR": "gs://b/run7/logs/"}
    config = parse_config([], env=env)
    assert config.job_dir == "gs://b/run7"
    assert config.checkpoint_dir == "gs://b/run7/checkpoints/"
    assert config.tensorboard_dir == "gs://b/run7/logs/"
    assert parse_config(["--job-dir", "/tmp/mine"], env=env).job_dir == "/tmp/mine"


def test_dry_run_uses_synthetic_data_two_steps_and_a_temporary_job_dir():
    config = parse_config(["--dry-run", "--data", "mnist"], env={})
    made = Path(config.job_dir)
    shutil.rmtree(made)  # trainer.task removes it when the run ends; here nothing runs
    assert (config.data, config.steps_per_epoch, config.epochs, config.job_dir_is_temporary) == (
        "synthetic", 2, 1, True)
    assert made.name.startswith("mlsubmit-dry-run-")


def test_device_selection():
    assert select(None, 0, 0) == ("/cpu:0",)
    assert select(None, 2, 0) == ("/gpu:0", "/gpu:1")
    assert select(None, 0, 4) == tuple(f"/cpu:{i}" for i in range(4))
    assert select(1, 4, 0) == ("/gpu:0",)
    assert select(0, 4, 0) == ("/cpu:0",)
    with pytest.raises(TrainerError, match=r"received 4, but this machine has 0 GPUs.*--emulate-devices 4"):
        select(4, 0, 0)


@pytest.mark.parametrize("spec, devices, expected", [
    ({}, 1, strategy.DEFAULT),
    ({}, 4, strategy.MIRRORED),
    ({"chief": ["a:1"], "worker": ["b:1"]}, 1, strategy.MULTI_WORKER),
    ({"chief": ["a:1"], "worker": ["b:1", "c:1"], "ps": ["d:1"]}, 2, strategy.PARAMETER_SERVER),
])
def test_strategy_choice(spec, devices, expected):
    assert strategy.choose(Cluster({k: tuple(v) for k, v in spec.items()}), devices).name == expected


def test_strategy_rejects_parameter_servers_without_workers():
    with pytest.raises(TrainerError, match="parameter server.*no workers"):
        strategy.choose(Cluster({"chief": ("a:1",), "ps": ("b:1",)}), 1)


def test_cluster_from_tf_config_rewrites_master_and_reads_cluster_spec():
    tf_config = {"cluster": {"master": ["h:1"], "worker": ["h:2"]}, "task": {"type": "master", "index": 0}}
    cluster = from_environment({"TF_CONFIG": json.dumps(tf_config)})
    assert cluster.task_type == "chief" and cluster.spec == {"chief": ("h:1",), "worker": ("h:2",)}
    assert cluster.is_chief and cluster.is_distributed
    spec = {"cluster": {"workerpool0": ["h:1"], "workerpool1": ["h:2", "h:3"]}, "task": {"type": "workerpool1",
                                                                                      "index": 1}}
    cluster = from_environment({"CLUSTER_SPEC": json.dumps(spec)})
    assert (cluster.task_type, cluster.task_index, cluster.shape()) == ("worker", 1, {"chief": 1, "worker": 2})
    assert not from_environment({}).is_distributed


def _raw(**changes):
    raw = synthetic("synthetic:4x4x1:3:20", seed=1)
    raw.update(changes)
    return raw


@pytest.mark.parametrize("changes, message", [
    ({"y_train": np.zeros(5, dtype=np.int64)}, "x_train has 20 samples but y_train has 5"),
    ({"y_test": -np.ones(5, dtype=np.int64)}, "labels out of range"),
    ({"y_train": np.full(20, 0.5)}, "labels must be whole numbers"),
    ({"x_test": np.zeros((5, 3, 3, 1), np.uint8)}, "x_test samples"),
    ({"x_train": np.array(["a"] * 20)}, "dtype <U1"),
])
def test_malformed_data_is_one_clear_error(changes, message):
    with pytest.raises(TrainerError, match=message):
        prepare(_raw(**changes), source="t", validation_split=0.1, seed=0)


def test_uint8_is_scaled_channel_added_one_hot_accepted():
    raw = _raw()
    raw["x_train"] = raw["x_train"][..., 0]  # (n, H, W)
    raw["y_train"] = np.eye(3, dtype=np.float32)[raw["y_train"]]
    arrays = prepare(raw, source="t", validation_split=0.25, seed=0)
    assert arrays.x_train.shape[1:] == (4, 4, 1) and arrays.x_train.dtype == np.float32
    assert 0.0 <= arrays.x_train.min() and arrays.x_train.max() <= 1.0
    assert len(arrays.x_train) == 15 and len(arrays.x_val) == 5 and arrays.num_classes == 3
