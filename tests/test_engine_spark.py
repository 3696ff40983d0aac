"""`mlsubmit train --target spark://…` on a real Spark standalone master and two workers (2 cores each) on
127.0.0.1. Each job here pays a Spark application's start (a driver JVM, executors registering): the
parameter-server layout and tuning run on Dask, an evaluator beside chief and worker on Ray, a user's trainer
unmodified on Dask and Ray (here test_stock_nodes installs a package's requirement from the index on the executors);
here the bundled trainer as chief + worker in sync, stock nodes, a failing replica and three replicas in 4 slots (the
cancel)."""

from __future__ import annotations

import re
import sys

import pytest

from tests.support import engine_checks as checks
from tests.support.engine_clusters import node_home, spark_cluster, stock_python
from tests.support.engine_suite import (home, test_a_failing_replica_fails_the_job_with_its_last_lines,  # noqa: F401
                                        test_cancel_stops_every_replica, tiny)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    found = spark_cluster(tmp_path_factory.mktemp("spark"), node_home(tmp_path_factory))
    yield found
    found.stop()


def test_the_bundled_trainer_as_chief_and_worker_in_sync(cluster, tmp_path, home):
    """(The evaluator, a third replica like the cancel's parameter server here, follows on Dask and Ray.) The
    application asks for the job's 2 cores only (spark.cores.max), which the master gives it in one executor (the
    cluster consolidates), not the cluster's 4 in two: the workers' executor launches say so."""
    before = cluster.log.stat().st_size
    checks.check_synchronous_chief_and_worker(cluster, tmp_path, home)
    with cluster.log.open("rb") as log:
        log.seek(before)
        launched = re.findall(r'"--cores" "(\d+)"', log.read().decode(errors="replace"))
    assert launched == ["2"], launched


def test_stock_nodes(cluster, tmp_path, home):
    """The executors' Python workers are a stock Python (PYSPARK_PYTHON; PySpark wants the driver's version):
    pyspark comes from Spark's own pyspark.zip, and the launcher, its venv and pip are that Python's."""
    stock = stock_python("%d.%d" % sys.version_info[:2])
    if stock is None:
        pytest.skip("no stock Python %d.%d (pyenv) on this machine" % sys.version_info[:2])
    checks.check_stock_nodes(cluster, tmp_path, home, stock, {"PYSPARK_PYTHON": stock.path})
