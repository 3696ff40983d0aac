"""A spot job on the training-service emulator, preempted twice (`mlsubmit emulator --preempt-spot-after`), ends
SUCCEEDED with the same result as the same job never preempted: the bundled trainer resumes from its backup in
AIP_CHECKPOINT_DIR each time the emulator starts its replicas again. `mlsubmit train --spot` sends
scheduling.strategy SPOT and prints the estimate with its spot note; `jobs describe` shows what it cost."""

from __future__ import annotations

import json
import re

import pytest

from support.training_emulator import TrainingEmulator

pytest_plugins = ["support.training_emulator", "support.submit_cli"]
pytestmark = pytest.mark.slow
PREEMPT_AFTER = 12  # seconds after the replicas start: the trainer has finished some epochs, not all
# A trainer run of ~25-40 s here: 8 epochs of a small dense model; the same seed in both runs.
TRAINER_ARGS = ("--", "--data", "synthetic:16x16x1:4:3000", "--batch-size", "8", "--epochs", "8", "--patience", "50",
                "--model", "dense", "--seed", "7")


@pytest.fixture(scope="module")
def training_emulator(gcs_emulator, emulator_home):
    with TrainingEmulator(gcs_endpoint=gcs_emulator.endpoint, home=emulator_home,
                          extra_args=("--preempt-spot-after", str(PREEMPT_AFTER), "--preempt-spot-times", "2")
                          ) as emulator:
        yield emulator


def _job_dir(stderr: str) -> str:
    match = re.search(r"artifacts: (gs://\S+?)/ \(MANIFEST\.json written last: complete\)", stderr)
    assert match, stderr[-3000:]
    return match.group(1)


def test_a_spot_job_preempted_twice_ends_like_one_never_preempted(cloud):
    common = ("train", "--machine-type", "n1-standard-4", "--package-path", "trainer", "--skip-preflight")
    spot = cloud.run(*common, "--spot", "--job-name", "spot_run", *TRAINER_ARGS, timeout=600)
    assert spot.code == 0, spot.stderr[-3000:]
    assert "cost estimate (Vertex AI custom training, us-central1, spot prices):" in spot.stderr
    assert "spot prices may change" in spot.stderr
    said = [line for line in spot.stdout.splitlines() if "were preempted" in line]
    assert len(said) == 2, spot.stdout[-3000:]  # preempted exactly twice, then left to finish

    steady = cloud.run(*common, "--job-name", "steady_run", *TRAINER_ARGS, timeout=600)
    assert steady.code == 0, steady.stderr[-3000:]
    assert "were preempted" not in steady.stdout
    assert "  rate: $0.2185/h" in steady.stderr  # on demand: the table's n1-standard-4 price

    jobs = {job["displayName"]: job for job in cloud.vertex_jobs()}
    assert jobs["spot_run"]["jobSpec"]["scheduling"] == {"strategy": "SPOT"}
    assert "scheduling" not in jobs["steady_run"]["jobSpec"]
    assert {job["state"] for job in jobs.values()} == {"JOB_STATE_SUCCEEDED"}

    preempted = json.loads(cloud.object(f"{_job_dir(spot.stderr)}/metrics.json"))
    never = json.loads(cloud.object(f"{_job_dir(steady.stderr)}/metrics.json"))
    assert preempted["resumed_from_epoch"] >= 1, preempted  # it resumed from a backup, not from scratch
    assert never.get("resumed_from_epoch") in (None, 0), never
    assert preempted["epochs_run"] == never["epochs_run"] == 8
    history = {name: json.loads(cloud.object(f"{_job_dir(run.stderr)}/history.json"))
               for name, run in (("spot", spot), ("steady", steady))}
    assert len(history["spot"]["loss"]) == len(history["steady"]["loss"]) == 8
    for key in ("test_accuracy", "test_loss"):
        assert preempted[key] == pytest.approx(never[key], rel=1e-4, abs=1e-5), key
    assert history["spot"]["loss"][-1] == pytest.approx(history["steady"]["loss"][-1], rel=1e-4)

    described = cloud.run("jobs", "describe", jobs["spot_run"]["name"].rsplit("/", 1)[1])
    assert described.code == 0, described.stderr
    assert re.search(r"cost\s+unknown \(no price for n1-standard-4 \(spot\)\)", described.stdout), described.stdout
