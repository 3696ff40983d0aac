"""`mlsubmit train --target dask://…` on a real Dask scheduler with three worker processes on 127.0.0.1."""

from __future__ import annotations

import time

import pytest

from tests.support import engine_checks as checks
from tests.support.engine_clusters import dask_cluster, free_port

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    found = dask_cluster(tmp_path_factory.mktemp("dask"))
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


def test_chief_worker_and_parameter_server(cluster, tmp_path, home):
    checks.check_parameter_servers(cluster, tmp_path, home)


def test_a_users_trainer_unmodified(cluster, tmp_path, home):
    checks.check_user_trainer(cluster, tmp_path, home)


def test_a_failing_replica_fails_the_job_with_its_last_lines(cluster, tmp_path, home, tiny):
    checks.check_failing_replica(cluster, tmp_path, home, tiny)


def test_cancel_stops_every_replica(cluster, tmp_path, home, tiny):
    checks.check_cancel(cluster, tmp_path, home, tiny)


def test_a_job_larger_than_the_cluster_starts_nothing(cluster, tmp_path, home, tiny):
    done = checks.train(cluster, "--package-path", str(tiny), "--module-name", "tinypkg.task", "--workers", "2",
                        "--ps", "1", "--job-name", "big_job", home=home, cwd=tmp_path)
    assert (done.returncode, done.stderr.count("\n")) == (2, 1), done.stderr
    assert f"the job needs 4 replica slots on {cluster.target}, which has 3 free" in done.stderr
    assert not (home / "cluster-jobs" / "big_job").exists() and done.stdout == ""


def test_an_unreachable_cluster_is_named_within_10_seconds(tmp_path, home, tiny):
    class Nowhere:
        target, env = f"dask://127.0.0.1:{free_port()}", {}

    started = time.monotonic()
    done = checks.train(Nowhere, "--package-path", str(tiny), "--module-name", "tinypkg.task", home=home,
                        cwd=tmp_path)
    assert (done.returncode, done.stderr.count("\n")) == (2, 1), done.stderr
    assert f"cannot reach the dask cluster at {Nowhere.target}" in done.stderr
    assert time.monotonic() - started < 15 and done.stdout == ""
