"""`mlsubmit train --target spark://…` on a real Spark standalone master and two workers (2 cores each) on 127.0.0.1."""

from __future__ import annotations

import pytest

from tests.support import engine_checks as checks
from tests.support.engine_clusters import spark_cluster

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    found = spark_cluster(tmp_path_factory.mktemp("spark"))
    yield found
    found.stop()


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    return tmp_path_factory.mktemp("home")  # the launcher's venvs are built once for the module, as on a node


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return checks.tiny_project(tmp_path_factory.mktemp("tiny"))


def test_the_bundled_trainer_as_chief_and_worker_in_sync(cluster, tmp_path, home):
    checks.check_synchronous_chief_and_worker(cluster, tmp_path, home)


def test_a_users_trainer_unmodified(cluster, tmp_path, home):
    checks.check_user_trainer(cluster, tmp_path, home)


def test_a_failing_replica_fails_the_job_with_its_last_lines(cluster, tmp_path, home, tiny):
    checks.check_failing_replica(cluster, tmp_path, home, tiny)


def test_cancel_stops_every_replica(cluster, tmp_path, home, tiny):
    checks.check_cancel(cluster, tmp_path, home, tiny)
