"""`mlsubmit train --target dask://…` on a real Dask scheduler with three worker processes on 127.0.0.1."""

from __future__ import annotations

import time

import pytest

from tests.support import engine_checks as checks
from tests.support.engine_clusters import dask_cluster, free_port
from tests.support.engine_suite import (home, test_a_failing_replica_fails_the_job_with_its_last_lines,  # noqa: F401
                                        test_a_job_larger_than_the_cluster_starts_nothing,
                                        test_a_tuning_study_runs_its_trials_on_the_cluster,
                                        test_a_users_trainer_unmodified, test_cancel_stops_every_replica,
                                        test_chief_worker_and_parameter_server, test_stock_nodes,
                                        test_the_bundled_trainer_as_chief_worker_and_evaluator_in_sync, tiny)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    found = dask_cluster(tmp_path_factory.mktemp("dask"))
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


def test_a_gs_job_dir(cluster, tmp_path, home, gcs):
    checks.check_gcs_job_dir(cluster, tmp_path, home, gcs)
