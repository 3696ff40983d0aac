"""Report a hyperparameter-tuning metric the way the tuning services read it (cloudml-hypertune's file format).

    from mlsubmit_runtime.hypertune import report_metric
    report_metric("accuracy", 0.93, step=epoch)

With the `cloudml-hypertune` package installed (pip: cloudml-hypertune) its HyperTune reporter is used; without
it, the same JSON lines are written here: `{"global_step": "N", "<tag>": "<value>", "timestamp": …, "trial":
"<CLOUD_ML_TRIAL_ID>"}`, the last 100 kept, in `$CLOUD_ML_HP_METRIC_FILE` (default /tmp/hypertune/output.metrics).
"""

from __future__ import annotations

import json
import os
import time
from collections import deque

DEFAULT_TAG = "training/hptuning/metric"
DEFAULT_FILE = "/tmp/hypertune/output.metrics"
_KEPT = 100
_reporter = None


class _FileReporter:
    """The format cloudml-hypertune writes, for machines without that package."""

    def __init__(self) -> None:
        self.path = os.environ.get("CLOUD_ML_HP_METRIC_FILE", DEFAULT_FILE)
        self.trial = os.environ.get("CLOUD_ML_TRIAL_ID", "0")
        self.entries: deque = deque(maxlen=_KEPT)

    def report_hyperparameter_tuning_metric(self, hyperparameter_metric_tag, metric_value, global_step=None):
        self.entries.append({"timestamp": time.time(), "trial": str(self.trial),
                             hyperparameter_metric_tag or DEFAULT_TAG: str(float(metric_value)),
                             "global_step": str(int(global_step) if global_step else 0)})
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        with open(self.path, "w") as out:
            out.writelines(json.dumps(entry, sort_keys=True) + "\n" for entry in self.entries)


def report_metric(tag: str, value: float, step: int | None = None) -> None:
    """Report `value` of the metric `tag` (the job's hyperparameterMetricTag / metricId) at `step`."""
    global _reporter
    if _reporter is None:
        try:
            import hypertune

            _reporter = hypertune.HyperTune()
        except ImportError:
            _reporter = _FileReporter()
    _reporter.report_hyperparameter_tuning_metric(hyperparameter_metric_tag=tag, metric_value=value,
                                                  global_step=step)
