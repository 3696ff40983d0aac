"""`mlsubmit train --target … --hptune-config FILE`: a tuning study whose trials run on the cluster.

The study is mlsubmit.tuning.local_study's (the same suggestions, metrics, INFEASIBLE rules and results); each trial
is one cluster job (`<study>-trial-N`, its own record) with the trial's `--name=value` arguments, its job dir
`<job dir>/<trial id>`, CLOUD_ML_TRIAL_ID and CLOUD_ML_HP_METRIC_FILE, and `task.trial` in TF_CONFIG (set by the
launcher). The trials run one after another: Spark and Ray allow one application / connection per process, and a
trial already spreads over the cluster. The metric file is read here, so the job dir must be shared (as a
cluster job's is anyway).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mlsubmit.tuning.local_study import LocalTrial, LocalTuning


class ClusterTuning(LocalTuning):
    def __init__(self, spec: Any, tuning: Any, *, api: str, job_dir: str, target: str, packages: tuple[list, str],
                 say: Callable[[str], None], seed: int = 0):
        super().__init__(spec, tuning, api=api, job_dir=job_dir, python=Path("."), say=say, seed=seed)
        self.target, self.packages = target, packages
        self._one_at_a_time = threading.Lock()
        self._drivers: dict[str, Any] = {}

    def cancel(self) -> None:
        super().cancel()
        for driver in list(self._drivers.values()):
            driver.cancel()

    def _run_trial(self, trial: LocalTrial) -> None:
        from mlsubmit.targets.cluster_base import engine_for
        from mlsubmit.targets.cluster_run import run_on_cluster
        from mlsubmit.tuning.search import trial_args

        started = time.monotonic()
        metric_file = Path(trial.job_dir) / "hypertune" / "output.metrics"
        with self._one_at_a_time:
            if self._cancel.is_set():
                trial.state, trial.reason = "CANCELLED", "stopped"
                return
            try:
                spec = self.spec.replace(args=(*self.spec.args, *trial_args(trial.values)), job_dir=trial.job_dir)
                self.say(f"trial {trial.id}: {' '.join(trial_args(trial.values))} (job dir {trial.job_dir})")
                outcome = run_on_cluster(
                    engine_for(self.target), spec, api=self.api, package_path="", setup_py=None,
                    say=lambda line: self.say(f"[trial {trial.id}] {line}"), packages=self.packages,
                    job_id=f"{self.spec.job_name}-trial-{trial.id}", timeout=spec.max_runtime_seconds,
                    extra_env={"CLOUD_ML_TRIAL_ID": trial.id, "CLOUD_ML_HP_METRIC_FILE": str(metric_file)},
                    on_driver=lambda driver: self._drivers.__setitem__(trial.id, driver))
            except Exception as err:  # a trial that cannot start is a failed trial, never a dead study
                trial.state, trial.reason = "INFEASIBLE", f"the trial could not start: {err}"
                return
            finally:
                trial.seconds = time.monotonic() - started
                self._drivers.pop(trial.id, None)
        self._settle(trial, outcome, metric_file)
