"""`train --target` input checked before anything is built or started (no cluster needed)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from mlsubmit.errors import UsageError
from mlsubmit.targets.cluster_base import parse_target

ROOT_TRAINER = "trainer"


def _run(*code_and_args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *code_and_args], capture_output=True, text=True, timeout=120, cwd=cwd)


@pytest.mark.parametrize("given, expected", [
    ("spark://10.0.0.5:7077", ("spark", "10.0.0.5:7077")), ("dask://sched:8786/", ("dask", "sched:8786")),
    ("tcp://127.0.0.1:8786", ("dask", "127.0.0.1:8786")), ("RAY://head:10001", ("ray", "head:10001"))])
def test_targets_parse(given, expected):
    assert parse_target(given) == expected


@pytest.mark.parametrize("given, said", [
    ("sprak://h:7077", "did you mean 'spark'"), ("yarn://h:1", "spark://HOST:PORT, dask://HOST:PORT, ray://HOST:PORT"),
    ("spark://h", "a port from 1 to 65535"), ("dask://h:99999", "a port from 1 to 65535")])
def test_bad_targets_say_what_is_allowed(given, said):
    with pytest.raises(UsageError) as caught:
        parse_target(given)
    assert said in str(caught.value) + (caught.value.hint or "")


def test_an_unknown_scheme_exits_2_with_one_line_and_builds_nothing(tmp_path):
    done = _run("-m", "mlsubmit", "train", "--target", "rya://127.0.0.1:10001", "--package-path", "nowhere",
                cwd=tmp_path)
    assert (done.returncode, done.stderr.count("\n")) == (2, 1), done.stderr
    assert "did you mean 'ray'" in done.stderr and not list(tmp_path.iterdir())


def test_a_missing_extra_is_named(tmp_path):
    code = ("import sys; sys.modules['distributed'] = None; from mlsubmit.cli import main; "
            "sys.argv = ['mlsubmit', 'train', '--target', 'dask://127.0.0.1:1', '--package-path', 'nowhere']; main()")
    done = _run("-c", code, cwd=tmp_path)
    assert (done.returncode, done.stderr.count("\n")) == (2, 1), done.stderr
    assert "needs the distributed package" in done.stderr and "pip install 'mlsubmit[dask]'" in done.stderr


@pytest.mark.parametrize("flag", [["--local"], ["--start-port", "4000"], ["--backends", "jax"]])
def test_target_with_local_only_options_is_refused(flag, tmp_path):
    done = _run("-m", "mlsubmit", "train", "--target", "dask://127.0.0.1:1", *flag, cwd=tmp_path)
    assert (done.returncode, done.stderr.count("\n")) == (2, 1), done.stderr
    assert f"invalid option with --target: {flag[0]}" in done.stderr


@pytest.mark.parametrize("target, flag, said", [
    ("dask://127.0.0.1:1", ["--spot"], "a Dask cluster places each replica on a node it already has"),
    ("ray://127.0.0.1:1", ["--max-cost", "3"], "mlsubmit knows Google's prices, not what the Ray cluster's machines cost")])
def test_spot_and_max_cost_on_a_cluster_say_the_engine_and_what_to_do(target, flag, said, tmp_path):
    """Not the `--local` message: the engine given, why it cannot apply, what to do; before the cluster is asked."""
    done = _run("-m", "mlsubmit", "train", "--target", target, *flag, "--package-path", "nowhere", cwd=tmp_path)
    assert (done.returncode, done.stderr.count("\n")) == (2, 1), done.stderr
    assert done.stderr.startswith(f"error: invalid option with --target {target}: {' '.join(flag)} ({said}")
    assert f"drop {flag[0]}; " in done.stderr and "--local" not in done.stderr and not list(tmp_path.iterdir())
