"""The emulator under hostile or careless requests: names the real services refuse are refused before anything
is stored (no phantom job), and whatever arrives on the wire — HEAD, OPTIONS, TRACE, an unknown method, an
over-long URL or header, broken chunking, a body that never comes — is answered in Google's error JSON with the
right code, within the read timeout, and the emulator keeps serving; a burst of 200 clients is answered."""

from __future__ import annotations

import gzip
import json
import os
import socket
import time
import zlib
from urllib.parse import urlsplit

import pytest

from support.training_emulator import TrainingEmulator

pytest_plugins = ["support.training_emulator"]  # fixtures: task_package, emulator_home

READ_TIMEOUT = 1.0


@pytest.fixture(scope="module")
def training_emulator(gcs_emulator, emulator_home):
    saved = os.environ.get("MLSUBMIT_EMULATOR_READ_TIMEOUT")
    os.environ["MLSUBMIT_EMULATOR_READ_TIMEOUT"] = str(READ_TIMEOUT)
    try:
        emulator = TrainingEmulator(gcs_endpoint=gcs_emulator.endpoint, home=emulator_home).start()
    finally:
        if saved is None:
            os.environ.pop("MLSUBMIT_EMULATOR_READ_TIMEOUT")
        else:
            os.environ["MLSUBMIT_EMULATOR_READ_TIMEOUT"] = saved
    try:
        yield emulator
    finally:
        emulator.stop()


def job_count(emulator) -> int:
    return sum(emulator.admin("GET", "health")["jobs"].values())


def vertex_body(uri: str, name: str = "hostile") -> dict:
    pool = {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "1",
            "pythonPackageSpec": {"executorImageUri": "us-docker.pkg.dev/vertex-ai/training/sklearn-cpu.1-6:latest",
                                  "packageUris": [uri], "pythonModule": "tinypkg.task", "args": ["--lines", "0"]}}
    return {"displayName": name, "jobSpec": {"workerPoolSpecs": [pool]}}


def legacy_body(uri: str, job_id: str = "hostile") -> dict:
    return {"jobId": job_id, "trainingInput": {"region": "us-central1", "packageUris": [uri],
                                               "pythonModule": "tinypkg.task", "runtimeVersion": "2.11",
                                               "pythonVersion": "3.7"}}


@pytest.mark.parametrize("path, body, says", [
    (f"/v1/projects/{'a' * 300}/locations/us-central1/customJobs", "vertex", "Invalid project id"),
    ("/v1/projects/-p/locations/us-central1/customJobs", "vertex", "Invalid project id '-p'"),
    ("/v1/projects/Bad_Project/jobs", "legacy", "Invalid project id 'Bad_Project'"),
    (f"/v1/projects/{'a' * 300}/jobs", "legacy", "at most 30 lowercase letters"),
    (f"/v1/projects/ok-project/locations/{'x' * 70}/customJobs", "vertex", "Invalid location"),
    ("/v1/projects/ok-project/locations/us-central1/customJobs", "long name", "at most 128 are allowed"),
    ("/v1/projects/ok-project/jobs", "long id", "jobId"),
])
def test_names_the_service_refuses_are_400_and_leave_no_job(training_emulator, task_package, path, body, says):
    _, uri = task_package
    payload = {"vertex": vertex_body(uri), "legacy": legacy_body(uri), "long name": vertex_body(uri, "n" * 129),
               "long id": legacy_body(uri, "j" * 129)}[body]
    before = job_count(training_emulator)
    status, answer = training_emulator.raw("POST", path, json.dumps(payload).encode())
    assert status == 400 and answer["error"]["status"] == "INVALID_ARGUMENT", answer
    assert says in answer["error"]["message"], answer
    assert job_count(training_emulator) == before  # nothing stored, nothing queued


def exchange(endpoint: str, data: bytes, *, pause_after: int | None = None) -> tuple[int, dict[str, str], bytes]:
    """Send raw bytes (optionally stopping after `pause_after` of them), return (status, headers, body)."""
    address = urlsplit(endpoint)
    with socket.create_connection((address.hostname, address.port), timeout=15) as connection:
        connection.sendall(data if pause_after is None else data[:pause_after])
        received = b""
        while b"\r\n\r\n" not in received or len(received.partition(b"\r\n\r\n")[2]) < _length(received):
            chunk = connection.recv(65536)
            if not chunk:
                break
            received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    return int(lines[0].split()[1]), headers, body


def _length(received: bytes) -> int:
    head = received.partition(b"\r\n\r\n")[0].decode("latin-1").lower()
    for line in head.split("\r\n"):
        if line.startswith("content-length:"):
            return int(line.split(":")[1])
    return 1 << 30


LIST = "/v1/projects/ok-project/locations/us-central1/customJobs"


@pytest.mark.parametrize("request_bytes, code, says", [
    (f"OPTIONS {LIST} HTTP/1.1\r\nHost: x\r\n\r\n".encode(), 405, "Method OPTIONS is not allowed"),
    (f"TRACE {LIST} HTTP/1.1\r\nHost: x\r\n\r\n".encode(), 405, "Method TRACE is not allowed"),
    (f"BREW {LIST} HTTP/1.1\r\nHost: x\r\n\r\n".encode(), 501, "Method not implemented: 'BREW'"),
    (f"GET /v1/{'x' * 20_000} HTTP/1.1\r\nHost: x\r\n\r\n".encode(), 414, "URL is too long"),
    (f"GET {LIST} HTTP/1.1\r\nHost: x\r\nX-Big: {'y' * 70_000}\r\n\r\n".encode(), 431, "headers are too large"),
    (f"GET {LIST} HTTP/1.1\r\n{''.join(f'X-{i}: v{chr(13)}{chr(10)}' for i in range(120))}\r\n".encode(), 431,
     "headers are too large"),
    (b"hello there\r\n\r\n", 400, "Bad HTTP/0.9 request type"),
    (f"POST {LIST} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
     "zz\r\n{}\r\n0\r\n\r\n".encode(), 400, "Malformed chunked request body"),
])
def test_wire_level_mistakes_are_answered_in_google_error_json(training_emulator, request_bytes, code, says):
    status, headers, body = exchange(training_emulator.endpoint, request_bytes)
    assert status == code and headers["content-type"].startswith("application/json"), (status, headers, body[:300])
    error = json.loads(body)["error"]
    assert error["code"] == code and error["status"] and says in error["message"], error
    if code == 405:
        assert headers["allow"] == "GET, HEAD, POST, DELETE"
    assert training_emulator.admin("GET", "health")["status"] == "ok"


def _post(body: bytes, *headers: str) -> bytes:
    lines = "".join(f"{h}\r\n" for h in ("Host: x", "Content-Type: application/json", *headers))
    return f"POST {LIST} HTTP/1.1\r\n{lines}Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body


def _peak_rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))


def _gzip_bomb(size: int = 64 << 20) -> bytes:
    """`size` bytes of spaces, gzipped block by block (about 64 KB; never `size` bytes in this process)."""
    packer, block = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS), b" " * (1 << 20)
    return b"".join(packer.compress(block) for _ in range(size >> 20)) + packer.flush()


CHUNKED = f"POST {LIST} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"


@pytest.mark.parametrize("request_bytes, says", [
    (lambda: _post(_gzip_bomb(), "Content-Encoding: gzip"),
     "Request payload size exceeds the limit: 1572864 bytes (after gzip decoding)."),
    (lambda: _post(gzip.compress(b"{}")[:-6], "Content-Encoding: gzip"),
     "Malformed gzip request body: it ends before the gzip stream does."),
    (lambda: _post(b"{}", "Content-Encoding: br"),
     "Unsupported Content-Encoding 'br': send the body as identity or gzip."),
    (lambda: CHUNKED.encode() + b"2\r\n{}\r\n0\r\n" + b"X-T: 1\r\n" * 200 + b"\r\n",
     "Malformed chunked request body: more than 100 trailer lines."),
], ids=["gzip bomb", "truncated gzip", "unknown encoding", "trailer flood"])
def test_bodies_are_bounded_after_decoding(training_emulator, request_bytes, says):
    """A 64 MB gzip bomb is 64 KB on the wire: inflated no further than the 1.5 MiB limit, in bounded memory."""
    request_bytes = request_bytes()
    before = _peak_rss_kib(training_emulator.process.pid)
    started = time.monotonic()
    status, headers, body = exchange(training_emulator.endpoint, request_bytes)
    assert time.monotonic() - started < 10  # wall time, on a machine that may be shared: the emulator answers at once
    assert status == 400 and json.loads(body)["error"]["message"] == says, body[:300]
    assert _peak_rss_kib(training_emulator.process.pid) - before < 20 << 10  # KiB: not the 64 MB it inflates to
    assert training_emulator.admin("GET", "health")["status"] == "ok"


def test_a_gzip_body_is_read_as_the_json_it_holds(training_emulator):
    """Decoded, then validated like any body: the service's own complaint about the job, not about the bytes."""
    status, _, body = exchange(training_emulator.endpoint, _post(gzip.compress(b'{"displayName": "j"}'),
                                                                 "Content-Encoding: gzip"))
    error = json.loads(body)["error"]
    assert status == 400 and "jobSpec" in error["message"] and "gzip" not in error["message"], error


def test_head_is_a_get_without_a_body(training_emulator):
    status, headers, body = exchange(training_emulator.endpoint,
                                     f"HEAD {LIST} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
    assert status == 200 and headers["content-type"].startswith("application/json") and body == b""
    status, headers, body = exchange(training_emulator.endpoint,
                                     b"HEAD /v1/nothing/here HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert status == 404 and body == b""


def test_a_stalled_body_gets_408_within_the_read_timeout(training_emulator):
    request = (f"POST {LIST} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n"
               '{"displayName": ').encode()
    started = time.monotonic()
    status, headers, body = exchange(training_emulator.endpoint, request + b" " * 200, pause_after=len(request))
    assert time.monotonic() - started < READ_TIMEOUT + 3
    assert status == 408 and json.loads(body)["error"]["status"] == "DEADLINE_EXCEEDED"
    assert headers["connection"] == "close"


def _tuning_body(uri: str) -> dict:
    return {"displayName": "study", "maxTrialCount": 1, "parallelTrialCount": 1,
            "studySpec": {"metrics": [{"metricId": "m", "goal": "MAXIMIZE"}],
                          "parameters": [{"parameterId": "p", "doubleValueSpec": {"minValue": 0, "maxValue": 1}}]},
            "trialJobSpec": vertex_body(uri)["jobSpec"]}


def _with(body: dict, path: tuple, value) -> dict:
    target = body
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return body


LABELS = {f"k{i}": "v" for i in range(65)}
ENV = [{"name": f"V{i}", "value": "1"} for i in range(101)]
POOL = ("jobSpec", "workerPoolSpecs", 0, "pythonPackageSpec", "env")


@pytest.mark.parametrize("path, make, field, says", [
    (LIST, lambda uri: _with(vertex_body(uri), ("labels",), LABELS), "labels",
     "at most 64 labels are allowed on a resource; received 65"),
    (LIST, lambda uri: _with(vertex_body(uri), POOL, ENV), "jobSpec.workerPoolSpecs[0].pythonPackageSpec.env",
     "at most 100 environment variables are allowed; received 101"),
    ("/v1/projects/ok-project/jobs", lambda uri: _with(legacy_body(uri), ("labels",), LABELS), "labels",
     "at most 64 labels are allowed on a resource; received 65"),
    ("/v1/projects/ok-project/locations/us-central1/hyperparameterTuningJobs",
     lambda uri: _with(_tuning_body(uri), ("trialJobSpec",) + POOL[1:], ENV),
     "trialJobSpec.workerPoolSpecs[0].pythonPackageSpec.env",
     "at most 100 environment variables are allowed; received 101"),
], ids=["vertex labels", "vertex env", "legacy labels", "tuning trial env"])
def test_label_and_env_counts_over_the_service_limits_are_400_and_leave_no_job(training_emulator, task_package, path,
                                                                                make, field, says):
    """The limits mlsubmit checks before sending (mlsubmit.jobspec.limits), enforced by the emulator as the service
    does: a client that skips them (gcloud, curl, an older mlsubmit) gets INVALID_ARGUMENT, and nothing is stored."""
    _, uri = task_package
    before = job_count(training_emulator)
    status, answer = training_emulator.raw("POST", path, json.dumps(make(uri)).encode())
    assert status == 400 and answer["error"]["status"] == "INVALID_ARGUMENT", answer
    violations = answer["error"]["details"][0]["fieldViolations"]
    assert violations == [{"field": field, "description": says}], violations
    assert job_count(training_emulator) == before


def test_label_and_env_counts_at_the_limits_are_accepted():
    from mlsubmit.emulator.validation import checked_body

    body = _with(vertex_body("gs://b/p.tar.gz"), ("labels",), dict(list(LABELS.items())[:64]))
    body = _with(body, POOL, ENV[:100])
    assert checked_body("aiplatform.v1", "GoogleCloudAiplatformV1CustomJob", body)["labels"] == body["labels"]


def test_a_burst_of_200_clients_is_answered_within_10_seconds(training_emulator):
    """Telling each connection's owner asks the kernel for that one socket (not all of /proc/net/tcp), and the
    listen backlog holds a burst: 200 clients at once are all answered, as the emulator's own user."""
    from support.burst import burst

    from mlsubmit.emulator import peers

    done = burst(training_emulator.endpoint, "/v1/projects/p/locations/us-central1/customJobs?pageSize=1", 200, 10)
    assert done.answered == 200 and set(done.statuses) == {200}, done
    assert done.slowest < 10, done
    server = socket.create_server(("127.0.0.1", 0))  # the two ways of telling agree, and say None for no socket
    with server, socket.create_connection(server.getsockname()) as client:
        accepted, peer = server.accept()
        with accepted:
            assert peers.owner_from_kernel(peer, server.getsockname()) == os.getuid()
            assert peers.owner_from_table(peer, server.getsockname()) == os.getuid()
            assert peers.owner_from_kernel(("127.0.0.1", 1), server.getsockname()) is None
