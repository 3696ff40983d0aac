"""The tests every engine module runs on its own cluster; a module imports the ones it runs and defines `cluster`
(module-scoped: one real cluster per engine per module)."""

from __future__ import annotations

import re

import pytest

from tests.support import engine_checks as checks
from tests.support.engine_clusters import stock_python


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    return tmp_path_factory.mktemp("home")  # the launcher's venvs are built once for the module, as on a node


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return checks.tiny_project(tmp_path_factory.mktemp("tiny"))


def test_the_bundled_trainer_as_chief_worker_and_evaluator_in_sync(cluster, tmp_path, home):
    checks.check_synchronous_chief_and_worker(cluster, tmp_path, home, evaluator=True)


def test_chief_worker_and_parameter_server(cluster, tmp_path, home, gcs):
    checks.check_parameter_servers(cluster, tmp_path, home, gcs)


def test_a_users_trainer_unmodified(cluster, tmp_path, home):
    checks.check_user_trainer(cluster, tmp_path, home)


def test_a_failing_replica_fails_the_job_with_its_last_lines(cluster, tmp_path, home, tiny):
    checks.check_failing_replica(cluster, tmp_path, home, tiny)


def test_cancel_stops_every_replica(cluster, tmp_path, home, tiny):
    checks.check_cancel(cluster, tmp_path, home, tiny)


def test_a_tuning_study_runs_its_trials_on_the_cluster(cluster, tmp_path, home):
    checks.check_tuning(cluster, tmp_path, home)


def test_stock_nodes(cluster, tmp_path, home):
    """The engine's workers run as they are; the replicas run a stock Python 3.10 on each node
    (MLSUBMIT_NODE_PYTHON): the launcher, its venv and pip are that Python's. (Spark's executors take their Python
    from PYSPARK_PYTHON instead: test_engine_spark.py has its own.)"""
    stock = stock_python("3.10")
    if stock is None:
        pytest.skip("no stock Python 3.10 (pyenv) on this machine")
    checks.check_stock_nodes(cluster, tmp_path, home, stock, {"MLSUBMIT_NODE_PYTHON": stock.path})


def test_a_job_larger_than_the_cluster_starts_nothing(cluster, tmp_path, home, tiny):
    """4 replicas on a cluster of 3 slots: exit 2, one line, no record, nothing printed."""
    done = checks.train(cluster, "--package-path", str(tiny), "--module-name", "tinypkg.task", "--workers", "2",
                        "--ps", "1", "--job-name", "big_job", home=home, cwd=tmp_path)
    assert (done.returncode, done.stderr.count("\n")) == (2, 1), done.stderr
    # 3 when the cluster is idle; fewer while an earlier test's replicas are still being released (Ray frees a
    # killed actor's slot asynchronously): the count said is the cluster's at that moment
    assert re.search(rf"the job needs 4 replica slots on {re.escape(cluster.target)}, which has [0-3] free",
                     done.stderr), done.stderr
    assert not (home / "cluster-jobs" / "big_job").exists() and done.stdout == ""
