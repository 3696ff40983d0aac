"""The README's Quickstart: its two commands are the ones CI and users run, and the main job works end to end."""

from __future__ import annotations

import csv
import os
import re
import subprocess
import sys

import pytest

from tests.support.trainer_run import ROOT, read_json
from tests.test_trainer_training import _manifest_ok


def test_the_quickstart_has_exactly_the_two_commands_and_ci_runs_the_test_one():
    readme = (ROOT / "README.md").read_text()
    quickstart = readme.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", quickstart, re.S).group(1)
    commands = [line.split("#")[0].strip() for line in block.splitlines() if line.strip()]
    assert commands == ["python3 dev.py job", "python3 dev.py test"]
    ci = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line and not line.startswith("#")]
    assert "python3 dev.py test" in ci


@pytest.mark.slow
def test_the_main_job_trains_two_replicas_on_digits_and_predict_scores_the_model(tmp_path):
    """What `python3 dev.py job` runs (fewer epochs): a chief and a worker train on the digits, then predict."""
    job_dir = tmp_path / "jobs" / "digits"
    # the job dir relative, as `dev.py job` passes it: the replicas resolve it (and the data beside it) in tmp_path
    run = subprocess.run([sys.executable, str(ROOT / "examples" / "digits_job.py"), "--job-dir", "jobs/digits",
                          "--epochs", "3"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "NO_COLOR": "1"})
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]

    _manifest_ok(job_dir)
    metrics = read_json(job_dir / "metrics.json")
    assert metrics["cluster"]["chief"] == 1 and metrics["cluster"]["worker"] == 1, metrics["cluster"]
    assert metrics["test_accuracy"] > 0.8, metrics
    assert re.search(r"job trainer_\S+ SUCCEEDED in [\d.]+ s — exit codes: chief-0 0, worker-0 0", run.stdout)

    with open(f"{job_dir}-predictions.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 360  # the 20% held-out test images
    right = sum(row["predicted"] == row["label"] for row in rows) / len(rows)
    assert abs(right - metrics["test_accuracy"]) < 1e-6  # predict scores the model the trainer measured
    assert re.search(r"ensemble .* {:.2f}%".format(100 * right), run.stdout), run.stdout[-2000:]
    assert (tmp_path / "jobs" / "digits-predictions.confusion.png").stat().st_size > 0
