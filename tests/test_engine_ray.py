"""`mlsubmit train --target ray://…` on a real Ray head (3 CPUs) on 127.0.0.1, reached through Ray Client."""

from __future__ import annotations

import pytest

from tests.support import engine_checks as checks
from tests.support.engine_clusters import ray_cluster, stock_python
from tests.support.engine_suite import (home, test_a_failing_replica_fails_the_job_with_its_last_lines,  # noqa: F401
                                        test_a_job_larger_than_the_cluster_starts_nothing,
                                        test_a_users_trainer_unmodified, test_cancel_stops_every_replica,
                                        test_chief_worker_and_parameter_server,
                                        test_the_bundled_trainer_as_chief_worker_and_evaluator_in_sync, tiny)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    found = ray_cluster(tmp_path_factory.mktemp("ray"))
    yield found
    found.stop()


def test_stock_nodes(cluster, tmp_path, home):
    """The Ray workers run the engine; the replicas run a stock Python 3.10 on each node
    (MLSUBMIT_NODE_PYTHON): the launcher, its venv and pip are that Python's."""
    stock = stock_python("3.10")
    if stock is None:
        pytest.skip("no stock Python 3.10 (pyenv) on this machine")
    checks.check_stock_nodes(cluster, tmp_path, home, stock, {"MLSUBMIT_NODE_PYTHON": stock.path})
