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


@pytest.mark.parametrize("given", ["dask://[::1]:8786", "spark://spark-master.example.com:7077",
                                   "ray://10.0.0.5:10001", "dask://worker_1.local.:8786"])
def test_hosts_an_engine_takes(given):
    assert parse_target(given)[1] == given.split("://")[1]


@pytest.mark.parametrize("host", ["h" * 10_000, "a" * 64 + ".com", "é.example.com", "a..b", "-a.com", "[zz]",
                                  "host name", "a/b", "[10.0.0.1]"])
def test_hosts_that_are_not_a_name_or_an_address_are_one_line(host):
    with pytest.raises(UsageError) as caught:
        parse_target(f"dask://{host}:8786")
    assert "whose HOST is a host name" in caught.value.one_line() and len(caught.value.one_line()) < 500


@pytest.mark.parametrize("name, ok", [("sync_job", True), ("run.1-ok", True), ("A" * 200, True),
                                      ("A" * 201, False), ("../../../x/CJTRAV", False), ("a/b", False),
                                      ("nl\nname", False), ("job\n", False), (" job", False), (".job", False),
                                      ("..", False), ("", False), ("space name", False), ("/abs", False),
                                      ("a/" * 60, False)])
def test_cluster_job_names_are_directory_names_or_refused(name, ok):
    from mlsubmit.targets.cluster_record import check_job_id

    if ok:
        assert check_job_id(name) == name
    else:
        with pytest.raises(UsageError, match="expected a cluster job name") as caught:
            check_job_id(name, "--job-name")
        assert "\n" not in caught.value.one_line()


def _answer(check, data: bytes, *, close: bool = True):
    """What `check` (an engine's first-message check) makes of a peer that sends `data` (then closes)."""
    import socket
    import time

    ours, theirs = socket.socketpair()
    with ours, theirs:
        theirs.sendall(data)
        if close:
            theirs.shutdown(socket.SHUT_WR)
        try:
            check(ours, time.monotonic() + 0.5)
            return "ok"
        except TimeoutError:
            return "timeout"
        except Exception as err:  # noqa: BLE001 - NotTheEngine, said as the CLI says it
            return str(err)


def test_the_engines_first_message_checks_read_bounded_answers():
    import struct

    from mlsubmit.targets.dask import check_handshake
    from mlsubmit.targets.ray import check_http2
    from mlsubmit.targets.spark import check_transport

    handshake = bytes.fromhex("83ab") + b"compression" + bytes.fromhex("c0a6") + b"python" + \
        bytes.fromhex("930310") + bytes.fromhex("07af") + b"pickle-protocol" + bytes.fromhex("05")
    frames = struct.pack("<QQ", 1, len(handshake)) + handshake
    assert _answer(check_handshake, struct.pack("<Q", len(frames)) + frames) == "ok"  # what distributed sends
    assert "not the start of a Dask handshake" in _answer(check_handshake, b"\xff" * 64)  # 18 EiB, never allocated
    assert _answer(check_handshake, struct.pack("<Q", len(frames)) + frames[:10], close=False) == "timeout"
    assert _answer(check_handshake, b"") == "it closed the connection without answering"
    assert _answer(check_http2, bytes([0, 0, 6, 4, 0, 0, 0, 0, 0]) + bytes(6)) == "ok"  # a SETTINGS frame
    assert "not the HTTP/2 settings" in _answer(check_http2, b"HTTP/1.1 400 Bad Request\r\n\r\n")
    failure = bytes([8]) + struct.pack(">i", 4) + b"name" + struct.pack(">i", 2) + b"no"
    assert _answer(check_transport, struct.pack(">q", 8 + len(failure)) + failure) == "ok"  # a StreamFailure
    assert "not a frame of Spark's RPC transport" in _answer(check_transport, b"\x00" * 7 + b"\x09\x04" + b"x" * 8)


def test_a_spark_application_asks_for_one_core_per_replica():
    """A standalone master gives an application every free core unless it says how many it wants: a 3-replica job
    takes 3 (the cluster's other cores stay free for others), whatever the cluster has."""
    from mlsubmit.targets.spark import application_conf

    conf = dict(application_conf("10.0.0.5:7077", 3, None))
    assert (conf["spark.master"], conf["spark.cores.max"]) == ("spark://10.0.0.5:7077", "3")
    assert "spark.driver.host" not in conf
    assert dict(application_conf("127.0.0.1:7077", 1, "127.0.0.1"))["spark.driver.host"] == "127.0.0.1"
