"""`mlsubmit train --target ray://…` on a real Ray head (3 CPUs) on 127.0.0.1, reached through Ray Client."""

from __future__ import annotations

import pytest

from tests.support.engine_clusters import ray_cluster
from tests.support.engine_suite import (home, test_a_failing_replica_fails_the_job_with_its_last_lines,  # noqa: F401
                                        test_a_job_larger_than_the_cluster_starts_nothing,
                                        test_a_users_trainer_unmodified, test_cancel_stops_every_replica,
                                        test_chief_worker_and_parameter_server, test_stock_nodes,
                                        test_the_bundled_trainer_as_chief_worker_and_evaluator_in_sync, tiny)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    found = ray_cluster(tmp_path_factory.mktemp("ray"))
    yield found
    found.stop()
