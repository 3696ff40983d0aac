"""`mlsubmit train --target spark://…` on a real Spark standalone master and two workers (2 cores each) on
127.0.0.1. Each job here pays a Spark application's start (a driver JVM, executors registering): the
parameter-server layout, a user's trainer and tuning run on Dask and Ray; here chief + worker + evaluator (4 slots)."""

from __future__ import annotations

import pytest

from tests.support import engine_checks as checks
from tests.support.engine_clusters import spark_cluster
from tests.support.engine_suite import (home, test_a_failing_replica_fails_the_job_with_its_last_lines,  # noqa: F401
                                        test_cancel_stops_every_replica, tiny)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    found = spark_cluster(tmp_path_factory.mktemp("spark"))
    yield found
    found.stop()


def test_the_bundled_trainer_as_chief_worker_and_evaluator(cluster, tmp_path, home):
    checks.check_synchronous_chief_and_worker(cluster, tmp_path, home, evaluator=True)
