"""`mlsubmit train --local` with the real trainer: the sdist in an isolated venv, one TensorFlow process per replica."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_local_runner import job_processes

from tests.support.trainer_run import ROOT, digits_npz, read_json
from tests.test_trainer_training import _manifest_ok

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def shared_home(tmp_path_factory) -> str:
    """One MLSUBMIT_HOME for this module: the trainer's venv is installed once, as for a user's second job."""
    return str(tmp_path_factory.mktemp("mlsubmit-home"))


@pytest.fixture
def env(shared_home) -> dict:
    return {**os.environ, "NO_COLOR": "1", "MLSUBMIT_HOME": shared_home}


def _train(*args: str, cwd: Path, env: dict, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mlsubmit", "train", "--local", "--package-path",
                           str(ROOT / "trainer"), *args], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env=env)


def _lines(output: str, replica: str) -> list[str]:
    return [line.split("] ", 1)[1].strip() for line in output.splitlines() if line.startswith(f"[{replica}]")]


# TensorFlow's start-up and cluster-connection lines, which no replica line may carry (tests/test_chatter.py has
# the lines themselves): the sources that print them.
CHATTER_SOURCES = ("absl::InitializeLog", "cudart_stub", "cpu_feature_guard", "rebuild TensorFlow", "cuda_platform",
                   "grpc_server_lib", "coordination_service", "Example stragglers", "generator_dataset_op")


def test_legacy_master_and_a_worker_train_in_sync_and_the_evaluator_follows(tmp_path, env):
    """Also: with TensorFlow's INFO lines on (TF_CPP_MIN_LOG_LEVEL=0 in the user's environment, which the replicas
    inherit; a trainer that leaves it unset prints them too), every replica line is the trainer's own or a real
    warning, none of the start-up or cluster connection lines."""
    npz = digits_npz(tmp_path / "digits.npz")
    done = _train("--api", "legacy", "--workers", "1", "--evaluators", "1", "--job-name", "sync_job",
                  "--job-dir", "job", "--", "--data", str(npz), "--epochs", "2", "--batch-size", "32",
                  "--steps-per-epoch", "4", cwd=tmp_path, env={**env, "TF_CPP_MIN_LOG_LEVEL": "0"})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    out = done.stdout
    replica_lines = [line for line in out.splitlines() if line.startswith(("[chief-0]", "[worker-0]",
                                                                             "[evaluator-0]"))]
    for source in CHATTER_SOURCES:
        assert not [line for line in replica_lines if source in line], source
    assert "TF_CONFIG names the chief 'master', as legacy AI Platform does" in out
    digests = {r: re.search(r"weights sha256 (\w+)", "\n".join(_lines(out, r))).group(1)
               for r in ("chief-0", "worker-0")}
    assert digests["chief-0"] == digests["worker-0"]  # synchronous: bit-identical weights
    evaluator = _lines(out, "evaluator-0")
    assert "evaluator-0: training has ended; evaluated 2 checkpoint(s)" in evaluator
    assert re.search(r"job sync_job SUCCEEDED in [\d.]+ s — exit codes: chief-0 0, worker-0 0, evaluator-0 0", out)
    job = tmp_path / "job"
    assert re.search(rf"job dir: {job}/ — \d+ files; MANIFEST.json lists \d+ of them \(complete", out)

    _manifest_ok(job)  # one artifact set: the chief's
    newest = max((p for p in job.rglob("*") if p.is_file() and p.parts[len(job.parts)] != "evaluation"),
                 key=lambda p: p.stat().st_mtime_ns)
    assert newest.name == "MANIFEST.json"
    assert not list(job.rglob("workertemp_*"))
    metrics = read_json(job / "metrics.json")
    assert metrics["cluster"] == {"chief": 1, "worker": 1, "evaluator": 1}
    assert (metrics["strategy"], metrics["replicas"], metrics["weights_sha256"]) == (
        "multi_worker_mirrored", 2, digests["chief-0"])
    last = read_json(job / "evaluation" / "evaluator-0.json")[-1]
    assert last["epoch"] == 2 and last["loss"] == pytest.approx(metrics["validation_loss"], abs=1e-5)
    import keras  # `mlsubmit predict` loads the artifacts with Keras 3

    assert keras.models.load_model(job / "model" / "model.keras").count_params() == metrics["parameters"]


def test_parameter_servers_and_workers_train_exports_and_every_process_ends(tmp_path, env):
    """One worker (#41: a TensorFlow process fewer than two; what each worker does is the same, and the cluster's
    worker indexes are tests/test_launcher.py's)."""
    done = _train("--workers", "1", "--ps", "1", "--job-name", "ps_job", "--job-dir", "job", "--",
                  "--data", "synthetic:8x8x1:4:256", "--epochs", "1", "--batch-size", "16", "--steps-per-epoch", "3",
                  cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    _manifest_ok(tmp_path / "job")
    metrics = read_json(tmp_path / "job" / "metrics.json")
    assert (metrics["strategy"], metrics["cluster"]) == ("parameter_server", {"chief": 1, "worker": 1, "ps": 1})
    for replica in ("worker-0", "ps-0"):  # they stop on their own once the chief is gone
        assert f"{replica}: the chief at 127.0.0.1:" in "\n".join(_lines(done.stdout, replica))
    assert "exit codes: chief-0 0, worker-0 0, ps-0 0" in done.stdout


def test_gpus_on_a_machine_without_them_runs_the_mirrored_path_on_emulated_devices(tmp_path, env):
    done = _train("--gpus", "2", "--job-dir", "job", "--", "--dry-run", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "the job asks for 2: each replica gets MLSUBMIT_EMULATE_DEVICES=2" in done.stdout  # never an argument
    chief = "\n".join(_lines(done.stdout, "chief-0"))
    assert "strategy     mirrored (2 replicas" in chief and "2 × CPU (emulated ×2)" in chief
    assert "devices: MLSUBMIT_EMULATE_DEVICES=2 was offered; the trainer's metrics.json says it trained on " \
           "2 × CPU (emulated ×2)" in done.stdout


def _replica_pid(job_id: str, role: str) -> int | None:
    for pid in job_processes(job_id):
        try:
            environ = dict(item.split("=", 1) for item in
                           Path(f"/proc/{pid}/environ").read_text(errors="replace").split("\0") if "=" in item)
        except OSError:
            continue
        if json.loads(environ.get("TF_CONFIG", "{}")).get("task", {}).get("type") == role:
            return pid
    return None


def test_a_worker_killed_mid_run_fails_the_job_within_seconds_and_leaves_no_process(tmp_path, env):
    npz = digits_npz(tmp_path / "digits.npz")
    job = subprocess.Popen([sys.executable, "-m", "mlsubmit", "train", "--local", "--package-path",
                            str(ROOT / "trainer"), "--workers", "1", "--job-name", "killed_job", "--job-dir", "job",
                            "--", "--data", str(npz), "--epochs", "200", "--batch-size", "16"],
                           cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        for line in job.stdout:
            if line.startswith("[worker-0]") and "Epoch 1/" in line:  # training: the first epoch has begun
                break
        os.kill(_replica_pid("killed_job", "worker"), signal.SIGKILL)
        killed = time.monotonic()
        rest, _ = job.communicate(timeout=60)
        assert time.monotonic() - killed < 15
    finally:
        if job.poll() is None:
            job.kill()
    assert job.returncode == 1, rest[-3000:]
    assert "error: job killed_job failed: worker-0 was killed by SIGKILL; the other replicas were stopped" in rest
    assert "job killed_job FAILED" in rest
    assert job_processes("killed_job") == []
