"""A trial's environment and how its metric is read back: the cloudml-hypertune file (written here by the real
package) and, for legacy jobs, a TensorFlow summary tag in event files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from mlsubmit.tuning.trial import read_metric, trial_env

ROOT = Path(__file__).resolve().parents[1]


def test_trial_env_puts_the_trial_in_tf_config_and_points_hypertune_at_its_file(tmp_path, monkeypatch):
    env = trial_env({"TF_CONFIG": json.dumps({"cluster": {}, "task": {"type": "master", "index": 0}})}, "3",
                    tmp_path / "m" / "output.metrics")
    assert json.loads(env["TF_CONFIG"])["task"] == {"type": "master", "index": 0, "trial": "3"}
    monkeypatch.setenv("CLOUD_ML_HP_METRIC_FILE", env["CLOUD_ML_HP_METRIC_FILE"])
    monkeypatch.setenv("CLOUD_ML_TRIAL_ID", env["CLOUD_ML_TRIAL_ID"])
    import hypertune

    tuner = hypertune.HyperTune()
    tuner.report_hyperparameter_tuning_metric(hyperparameter_metric_tag="acc", metric_value=0.5, global_step=10)
    tuner.report_hyperparameter_tuning_metric(hyperparameter_metric_tag="loss", metric_value=2.0, global_step=20)
    tuner.report_hyperparameter_tuning_metric(hyperparameter_metric_tag="acc", metric_value=0.75, global_step=30)
    assert read_metric(env["CLOUD_ML_HP_METRIC_FILE"], "acc") == (0.75, 30)
    assert read_metric(env["CLOUD_ML_HP_METRIC_FILE"], "other") == (None, 0)


def test_the_summary_tag_is_read_from_event_files_as_legacy_ai_platform_did(tmp_path, gcs):
    # TensorBoard's event-file writer and reader without TensorFlow (blocked: it would cost seconds to import)
    script = textwrap.dedent(f"""
        import sys, time
        sys.modules["tensorflow"] = None
        from tensorboard.compat.proto import event_pb2, summary_pb2
        from tensorboard.summary.writer.event_file_writer import EventFileWriter
        from mlsubmit.tuning.trial import read_summary_metric

        writer = EventFileWriter({str(tmp_path / "2" / "eval")!r})
        for step, value in ((20, 0.5), (10, 0.9), (40, 0.25)):
            value = summary_pb2.Summary.Value(tag="training/hptuning/metric", simple_value=value)
            writer.add_event(event_pb2.Event(wall_time=time.time(), step=step, summary=summary_pb2.Summary(
                value=[value])))
        writer.close()
        from pathlib import Path
        from mlsubmit.cloud.storage import put_file
        for path in Path({str(tmp_path / "2")!r}).rglob("events*"):
            put_file(path, "gs://{gcs[1]}/job/2/eval/" + path.name)
        print(read_summary_metric("gs://{gcs[1]}/job/2", "training/hptuning/metric"))
        print(read_summary_metric({str(tmp_path / "2")!r}, "training/hptuning/metric"),
              read_summary_metric({str(tmp_path / "2")!r}, "accuracy"), read_summary_metric({str(tmp_path)!r} + "/9",
                                                                                         "x"))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "STORAGE_EMULATOR_HOST": gcs[0].endpoint})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["(0.25,", "40)"] * 2 + ["(None,", "0)", "(None,", "0)"]
