"""`mlsubmit train --target dask://…` on a real Dask scheduler with three workers (no nannies) on
127.0.0.1.

The bundled trainer runs here once, as chief + worker + parameter server writing to a gs:// job dir; its
multi-worker sync training with an evaluator beside it runs on Ray (tests/test_engine_ray.py), the sync training on
Spark and Kubernetes: what differs between engines is how the replicas are placed and given their addresses, which
every job here exercises."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.support import engine_checks as checks
from tests.support.engine_clusters import dask_cluster, free_port, node_home
from tests.test_cluster_hostile import _refused, _train
from tests.support.engine_suite import (home, test_a_failing_replica_fails_the_job_with_its_last_lines,  # noqa: F401
                                        test_a_job_larger_than_the_cluster_starts_nothing,
                                        test_a_tuning_study_runs_its_trials_on_the_cluster,
                                        test_a_users_trainer_unmodified, test_cancel_stops_every_replica,
                                        test_chief_worker_and_parameter_server, test_stock_nodes, tiny)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    found = dask_cluster(tmp_path_factory.mktemp("dask"), node_home(tmp_path_factory))
    yield found
    found.stop()


def test_an_unreachable_cluster_is_named_within_10_seconds(tmp_path, home, tiny):
    class Nowhere:
        target, env = f"dask://127.0.0.1:{free_port()}", {}

    started = time.monotonic()
    done = checks.train(Nowhere, "--package-path", str(tiny), "--module-name", "tinypkg.task", home=home,
                        cwd=tmp_path)
    assert (done.returncode, done.stderr.count("\n")) == (2, 1), done.stderr
    assert f"cannot reach the dask cluster at {Nowhere.target}" in done.stderr
    assert time.monotonic() - started < 15 and done.stdout == ""


def test_max_runtime_stops_every_replica(cluster, tmp_path, home, tiny):
    checks.check_max_runtime(cluster, tmp_path, home, tiny)


def test_job_names_that_would_leave_the_record_directory_are_refused(cluster, tiny, tmp_path):
    """(#32, beside the other hostile targets of tests/test_cluster_hostile.py, on this module's cluster)
    `../../../x/CJTRAV` and a name with a newline are refused before anything is built, and `jobs
    describe|logs|cancel` of them neither read nor rewrite a record planted where they point (nor signal the pid it
    names); a name with '.' and '-' still runs and is recorded under cluster-jobs/. (Which names are refused:
    test_engine_units.py's test_cluster_job_names_are_directory_names_or_refused; here, how `train` refuses them.)"""
    home = tmp_path / "a" / "b" / "home"
    outside = tmp_path / "a" / "x" / "CJTRAV"  # cluster-jobs/../../../x/CJTRAV
    for name in ("../../../x/CJTRAV", "nl\nname"):
        done, seconds = _train(cluster.target, home, tmp_path, "--package-path", str(tiny), "--module-name",
                               "tinypkg.task", "--job-name", name)
        error = _refused(done, seconds, home)
        assert error.startswith("error: invalid value for --job-name: received ") and \
            "expected a cluster job name: a letter or digit, then letters, digits, '_', '-' or '.'" in error, error
    assert not outside.exists()

    sleeper = subprocess.Popen(["sleep", "300"])
    try:
        outside.mkdir(parents=True)
        planted = json.dumps({"job_id": "../../../x/CJTRAV", "state": "RUNNING", "pid": sleeper.pid})
        (outside / "job.json").write_text(planted)
        env = {**os.environ, "NO_COLOR": "1", "MLSUBMIT_HOME": str(home)}
        for command in ("describe", "logs", "cancel"):
            for name in ("../../../x/CJTRAV", "nl\nname"):
                done = subprocess.run([sys.executable, "-m", "mlsubmit", "jobs", command, name, "--api", "cluster"],
                                      env=env, capture_output=True, text=True, timeout=60, cwd=tmp_path)
                assert (done.returncode, done.stderr.count("\n"), done.stdout) == (2, 1, ""), done.stderr
                assert done.stderr.startswith("error: invalid value for JOB: received "), done.stderr
        assert (outside / "job.json").read_text() == planted and sleeper.poll() is None
    finally:
        sleeper.send_signal(signal.SIGKILL)
        sleeper.wait()

    done, _ = _train(cluster.target, home, tmp_path, "--package-path", str(tiny), "--module-name", "tinypkg.task",
                     "--job-name", "run.1-ok", "--", "--meet", "--at-once")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    assert json.loads((home / "cluster-jobs" / "run.1-ok" / "job.json").read_text())["state"] == "SUCCEEDED"
