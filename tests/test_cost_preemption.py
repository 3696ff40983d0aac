"""Spot jobs preempted by the training-service emulator. The bundled trainer, preempted (POST /emulator/v1/preempt
once it has finished epoch 1: at a point of its training, whatever the machine's speed), ends SUCCEEDED with the same
per-epoch losses and test metrics as the same job never preempted: it resumes from its backup in AIP_CHECKPOINT_DIR
when its replicas start again. `mlsubmit emulator --preempt-spot-after` preempts on a timer, at most
--preempt-spot-times times (a job preempted twice, started three times), with the same AIP_CHECKPOINT_DIR each start.
`mlsubmit train --spot` sends scheduling.strategy SPOT and prints the estimate with its spot note."""

from __future__ import annotations

import json
import re
import time

import pytest

from support.training_emulator import TrainingEmulator

pytest_plugins = ["support.training_emulator", "support.submit_cli"]
pytestmark = pytest.mark.slow
# the same seed in both runs. Preempted once, after epoch 1 of 10: a backup to resume from, and epochs left to run
# after it. The nine epochs after that backup are the margin for this test, polling from a loaded machine, to preempt
# before the trainer finishes and removes its backup (with three epochs left, a CI run once preempted a finished job,
# which then started afresh; with 1,500 samples, 0.2 s an epoch on a quiet machine, a full run once preempted after
# the ninth: 3,000 samples make each epoch, and the margin, twice as long). Each start costs a TensorFlow import:
# preempting more than once is the timer test's (a program without TensorFlow), not this one's.
EPOCHS = 10
PREEMPT_AFTER = 1
TRAINER_ARGS = ("--", "--data", "synthetic:16x16x1:10:3000", "--batch-size", "16", "--epochs", str(EPOCHS),
                "--patience", "100", "--model", "dense", "--seed", "7")


def _job_dir(stderr: str) -> str:
    match = re.search(r"artifacts: (gs://\S+?)/ \(MANIFEST\.json written last: complete\)", stderr)
    assert match, stderr[-3000:]
    return match.group(1)


def _wait_for_backup(cloud, job: dict, epochs: int, timeout: float = 300.0) -> None:
    """Until the job's backup in AIP_CHECKPOINT_DIR holds `epochs` finished epochs. The trainer pushes its backup
    after every epoch as one snapshot (LATEST names it); polled here, not through the followed logs, which arrive
    seconds later under load, by when the trainer may have finished and removed its backup."""
    checkpoints = f"{job['jobSpec']['baseOutputDirectory']['outputUriPrefix'].rstrip('/')}/checkpoints"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        latest = (cloud.object(f"{checkpoints}/LATEST") or b"").decode()
        meta = latest and cloud.object(f"{checkpoints}/snapshots/{latest}/training_metadata.json")
        if meta and json.loads(meta)["epoch"] >= epochs:  # (the snapshot LATEST named may be gone: read again)
            return
        time.sleep(0.02)
    raise AssertionError(f"no backup of {epochs} epoch(s) in {checkpoints} after {timeout} s")


def test_a_spot_job_preempted_ends_like_one_never_preempted(cloud):
    common = ("train", "--machine-type", "n1-standard-4", "--package-path", "trainer", "--skip-preflight")
    spot_run = cloud.start(*common, "--spot", "--job-name", "spot_run", *TRAINER_ARGS)
    steady_run = cloud.start(*common, "--job-name", "steady_run", *TRAINER_ARGS)  # at the same time: less wall time
    spot_run.wait_for("accepted")
    (job,) = [j for j in cloud.vertex_jobs() if j["displayName"] == "spot_run"]
    _wait_for_backup(cloud, job, PREEMPT_AFTER)  # right after epoch 1's backup
    assert cloud.emulator.admin("POST", f"preempt?job={job['name']}") == {"job": job["name"], "preempted": True}
    spot_run.wait_for("(preemption 1)")
    spot, steady = spot_run.finish(timeout=600), steady_run.finish(timeout=600)
    assert spot.code == 0, spot.stderr[-3000:]
    assert "cost estimate (Vertex AI custom training, us-central1, spot prices):" in spot.stderr
    assert "spot prices may change" in spot.stderr
    said = [line for line in spot.stdout.splitlines() if "were preempted" in line]
    assert len(said) == 1, spot.stdout[-3000:]  # preempted once, then left to finish

    assert steady.code == 0, steady.stderr[-3000:]
    assert "were preempted" not in steady.stdout
    assert "  rate: $0.2185/h" in steady.stderr  # on demand: the table's n1-standard-4 price

    jobs = {job["displayName"]: job for job in cloud.vertex_jobs()}
    assert jobs["spot_run"]["jobSpec"]["scheduling"] == {"strategy": "SPOT"}
    assert "scheduling" not in jobs["steady_run"]["jobSpec"]
    assert {job["state"] for job in jobs.values()} == {"JOB_STATE_SUCCEEDED"}

    preempted = json.loads(cloud.object(f"{_job_dir(spot.stderr)}/metrics.json"))
    never = json.loads(cloud.object(f"{_job_dir(steady.stderr)}/metrics.json"))
    assert preempted["resumed_from_epoch"] >= PREEMPT_AFTER, spot.stdout[-6000:]  # the second start resumed from its backup
    assert not [name for name in cloud.objects() if "/checkpoints/" in name]  # a finished job leaves no backup
    assert never.get("resumed_from_epoch") in (None, 0), never
    assert preempted["epochs_run"] == never["epochs_run"] == EPOCHS
    history = {name: json.loads(cloud.object(f"{_job_dir(run.stderr)}/history.json"))
               for name, run in (("spot", spot), ("steady", steady))}
    assert len(history["spot"]["loss"]) == len(history["steady"]["loss"]) == EPOCHS
    assert history["spot"]["loss"] == pytest.approx(history["steady"]["loss"], rel=1e-5), history  # every epoch
    for key in ("test_accuracy", "test_loss"):
        assert preempted[key] == pytest.approx(never[key], rel=1e-5), key

    described = cloud.run("jobs", "describe", jobs["spot_run"]["name"].rsplit("/", 1)[1])
    assert described.code == 0, described.stderr
    assert re.search(r"cost\s+unknown \(no price for n1-standard-4 \(spot\)\)", described.stdout), described.stdout


def test_the_emulator_preempts_spot_jobs_on_a_timer_at_most_n_times_with_the_same_checkpoint_dir(
        gcs, emulator_home, task_project):
    """`--preempt-spot-after 1 --preempt-spot-times 2`: a spot job whose replica sleeps 3 s (the timer fires 2 s
    before it would end) is stopped twice and finishes on its third start, each start with the same
    AIP_CHECKPOINT_DIR; an on-demand job (submitted at the same time, sleeping as long) is never stopped."""
    from support.submit_cli import Cloud

    gcs_emulator, bucket = gcs
    with TrainingEmulator(gcs_endpoint=gcs_emulator.endpoint, home=emulator_home,
                          extra_args=("--preempt-spot-after", "1", "--preempt-spot-times", "2")) as emulator:
        cloud = Cloud(emulator, gcs_emulator, bucket)
        common = ("train", "--package-path", task_project, "--python-module", "tinypkg.task", "--skip-preflight",
                  "--machine-type", "n1-standard-4", "--job-dir", f"gs://{bucket}/out")
        spot_run = cloud.start(*common, "--spot", "--", "--sleep", "3")
        steady_run = cloud.start(*common, "--", "--sleep", "3")
        spot, steady = spot_run.finish(timeout=300), steady_run.finish(timeout=300)
    assert spot.code == 0 and steady.code == 0, spot.stderr[-2000:] + steady.stderr[-2000:]
    said = [line for line in spot.stdout.splitlines() if "were preempted" in line]
    assert [re.search(r"\(preemption (\d)\)", line).group(1) for line in said] == ["1", "2"]
    starts = [json.loads(line.split("ENV ", 1)[1]) for line in spot.stdout.splitlines() if "| ENV {" in line]
    assert len(starts) == 3 and {s["AIP_CHECKPOINT_DIR"] for s in starts} == {f"gs://{bucket}/out/checkpoints/"}
    assert "were preempted" not in steady.stdout
