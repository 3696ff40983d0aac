"""`mlsubmit train --local` without TensorFlow: each replica's environment, what the trainer reads from it, ports."""

from __future__ import annotations

import json
import re
import socket

import pytest

from mlsubmit.errors import UsageError
from mlsubmit.local.local_job import check_runnable, plan, reserve_ports
from mlsubmit.launcher import replica as launcher
from mlsubmit.local.local_run import replicas_to_start
from mlsubmit.local.workdir import Workdir
from mlsubmit.jobspec.spec import JobSpec, Pool
from trainer.cluster import from_environment

CLUSTER = JobSpec(tier="CUSTOM", chief=Pool("chief", "n1-standard-4"), worker=Pool("worker", "n1-standard-4", 2),
                  ps=Pool("ps", "n1-standard-4"), evaluator=Pool("evaluator", "n1-standard-4"), target="local",
                  args=("--epochs", "2"))
PORTS = [9000, 9001, 9002, 9003, 9004]


def _by_name(job):
    return {r.name: r for r in job.replicas}


def test_vertex_environment_of_every_replica():
    job = plan(CLUSTER, api="vertex", job_id="local_1", job_dir="/jobs/one", ports=PORTS, gpus_here=0)
    replicas = _by_name(job)
    assert list(replicas) == ["chief-0", "worker-0", "worker-1", "ps-0", "evaluator-0"]
    worker = replicas["worker-1"]
    tf_config = json.loads(worker.env["TF_CONFIG"])
    assert tf_config["cluster"] == {"chief": ["127.0.0.1:9000"], "worker": ["127.0.0.1:9001", "127.0.0.1:9002"],
                                    "ps": ["127.0.0.1:9003"]}  # evaluators are never in TensorFlow's cluster
    assert tf_config["task"] == {"type": "worker", "index": 1}
    spec = json.loads(worker.env["CLUSTER_SPEC"])
    assert spec["task"] == {"type": "workerpool1", "index": 1}
    assert spec["cluster"]["workerpool3"] == ["127.0.0.1:9004"]
    assert (worker.env["AIP_MODEL_DIR"], worker.env["AIP_CHECKPOINT_DIR"], worker.env["AIP_TENSORBOARD_LOG_DIR"]) == (
        "/jobs/one/model/", "/jobs/one/checkpoints/", "/jobs/one/logs/")
    assert worker.env["CLOUD_ML_JOB_ID"] == "local_1"
    assert worker.args == ("--epochs", "2")  # the user's arguments exactly: Vertex AI adds no --job-dir
    assert json.loads(replicas["evaluator-0"].env["TF_CONFIG"])["task"] == {"type": "evaluator", "index": 0}


def test_legacy_environment_names_the_chief_master_and_carries_the_counts():
    job = plan(CLUSTER, api="legacy", job_id="local_2", job_dir="/jobs/two", ports=PORTS, gpus_here=0)
    chief = _by_name(job)["chief-0"]
    tf_config = json.loads(chief.env["TF_CONFIG"])
    assert "master" in tf_config["cluster"] and "chief" not in tf_config["cluster"]
    assert tf_config["task"] == {"type": "master", "index": 0}
    assert tf_config["job"]["evaluator_count"] == 1 and tf_config["job"]["parameter_server_count"] == 1
    assert not {"CLUSTER_SPEC", "AIP_MODEL_DIR"} & set(chief.env)
    assert chief.args == ("--epochs", "2", "--job-dir", "/jobs/two")  # legacy passes the jobDir it was given


def test_without_a_job_dir_nothing_is_added_and_vertex_sets_no_output_variables():
    for api in ("vertex", "legacy"):
        chief = plan(CLUSTER, api=api, job_id="j", job_dir=None, ports=PORTS, gpus_here=0).replicas[0]
        assert chief.args == ("--epochs", "2")
        assert not {"AIP_MODEL_DIR", "AIP_CHECKPOINT_DIR", "AIP_TENSORBOARD_LOG_DIR"} & set(chief.env)


@pytest.mark.parametrize("api", ["vertex", "legacy"])
def test_the_trainer_reads_each_replica_as_planned(api):
    job = plan(CLUSTER, api=api, job_id="j", job_dir="/jobs/j", ports=PORTS, gpus_here=0)
    for replica in job.replicas:
        cluster = from_environment(replica.env)
        assert (cluster.task_type, cluster.task_index) == (replica.role, replica.index)
        assert cluster.shape() == {"chief": 1, "worker": 2, "ps": 1, "evaluator": 1}  # the chief knows its evaluator


def test_gpus_this_machine_lacks_reach_the_trainer_through_its_environment_never_its_arguments(tmp_path):
    spec = JobSpec(tier="CUSTOM", chief=Pool("chief", "n1-standard-8", 1, "NVIDIA_TESLA_T4", 2), target="local",
                   args=("--output_dir", "out"), env=(("LOG_LEVEL", "debug"),))
    emulated = plan(spec, api="vertex", job_id="j", job_dir="/d", ports=[1], gpus_here=0)
    assert emulated.emulated_devices == 2 and emulated.replicas[0].emulate_devices == 2
    assert emulated.replicas[0].args == ("--output_dir", "out")
    workdirs = {"chief-0": Workdir(tmp_path, None)}
    (started,) = replicas_to_start(emulated, tmp_path / "python", spec.env_dict, workdirs)
    env, args = _as_the_launcher_starts_it(started)
    assert args == ("--output_dir", "out")
    assert (env["MLSUBMIT_EMULATE_DEVICES"], env["LOG_LEVEL"]) == ("2", "debug")
    real = plan(spec, api="vertex", job_id="j", job_dir="/d", ports=[1], gpus_here=2)
    (started,) = replicas_to_start(real, tmp_path, workdirs=workdirs)
    assert real.emulated_devices == 0 and "MLSUBMIT_EMULATE_DEVICES" not in _as_the_launcher_starts_it(started)[0]


def _as_the_launcher_starts_it(started):
    """(environment, arguments) of the module that the launcher process `started` runs."""
    spec = json.loads(started.env[launcher.SPEC_VARIABLE])
    assert started.argv[-1].endswith("launcher/replica.py") and spec["python"]
    return launcher.replica_env(spec, spec["role"], spec["index"], started.env)


@pytest.mark.parametrize("api", ["vertex", "legacy"])
def test_the_launcher_sets_for_each_local_replica_what_the_plan_says(api, tmp_path):
    """`train --local` starts every replica through the one launcher: what it sets is what the service sets."""
    job = plan(CLUSTER, api=api, job_id="j", job_dir="/jobs/j", ports=PORTS, gpus_here=0)
    workdirs = {r.name: Workdir(tmp_path / r.name, None) for r in job.replicas}
    started = replicas_to_start(job, tmp_path / "python", {"MINE": "1"}, workdirs)
    for planned, process in zip(job.replicas, started, strict=True):
        env, args = _as_the_launcher_starts_it(process)
        assert {k: env[k] for k in planned.env} == dict(planned.env) and args == planned.args
        assert env["MINE"] == "1" and "JAX_COORDINATOR_ADDRESS" not in env  # Vertex AI sets no coordinator
        assert process.cwd == str(tmp_path / planned.name)


@pytest.mark.parametrize("spec, message", [
    (JobSpec(tier="CUSTOM", chief=Pool("chief", "n1-standard-4"), ps=Pool("ps", "n1-standard-4"), target="local"),
     "1 parameter server.*no workers.*add --workers N"),
    (JobSpec(tier="BASIC_TPU", target="local"), "Cloud TPU"),
])
def test_shapes_this_machine_cannot_run_are_one_line(spec, message):
    with pytest.raises(UsageError) as error:
        check_runnable(spec)
    assert len(error.value.one_line().splitlines()) == 1
    assert re.search(message, error.value.one_line())


def test_ports_are_free_or_the_taken_one_is_named():
    ports = reserve_ports(3)
    assert len(set(ports)) == 3
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(UsageError, match=f"--start-port: received {port}.*port {port} cannot"):
            reserve_ports(2, port)
    with pytest.raises(UsageError, match="--start-port"):
        reserve_ports(3, 65534)
