"""`mlsubmit train --target spark://…` on a real Spark standalone master and two workers (2 cores each) on
127.0.0.1. Each job here pays a Spark application's start (a driver JVM, executors registering): the
parameter-server layout and tuning run on Dask and Ray; here chief + worker + evaluator (4 slots) and a user's
trainer unmodified."""

from __future__ import annotations

import pytest

from tests.support.engine_clusters import spark_cluster
from tests.support.engine_suite import (home, test_a_failing_replica_fails_the_job_with_its_last_lines,  # noqa: F401
                                        test_a_users_trainer_unmodified, test_cancel_stops_every_replica,
                                        test_the_bundled_trainer_as_chief_worker_and_evaluator_in_sync, tiny)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    found = spark_cluster(tmp_path_factory.mktemp("spark"))
    yield found
    found.stop()
