"""The Kubernetes side under hostile or careless input (issue #32). mlsubmit's own refusals — a malformed
kubeconfig, an out-of-range --max-restarts, a job name that would be cut, a bad namespace, an API server that never
answers — are one line on stderr, exit 2, nothing created. The emulated API (mlsubmit.emulator.kube_api) answers
every bad request as kube-apiserver does, with a Status of the right code and reason, stores nothing, keeps serving,
and runs nothing for a caller without its token. Nothing here trains: the only processes are kubectl and mlsubmit's
refusals."""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from mlsubmit.emulator.kube_api import KubeServer

KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"
READ_TIMEOUT = 1.0
JOBS = "/apis/batch/v1/namespaces/default/jobs"
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
POD_SPEC = {"restartPolicy": "Never", "containers": [{"name": "c", "image": "python", "command": ["true"]}]}
JOB = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "fine"}, "spec": {"template": {"spec": POD_SPEC}}}
TRAINER = os.path.join(os.path.dirname(__file__), "fixtures", "trainers", "vertex_strict", "trainer")


@pytest.fixture(scope="module")
def kube():
    saved = os.environ.get("MLSUBMIT_EMULATOR_READ_TIMEOUT")
    os.environ["MLSUBMIT_EMULATOR_READ_TIMEOUT"] = str(READ_TIMEOUT)
    try:
        server = KubeServer().start()
    finally:
        if saved is None:
            os.environ.pop("MLSUBMIT_EMULATOR_READ_TIMEOUT")
        else:
            os.environ["MLSUBMIT_EMULATOR_READ_TIMEOUT"] = saved
    yield server
    server.stop()


def _reply(sock: socket.socket) -> tuple[int, dict]:
    data = b""
    while b"\r\n\r\n" not in data:
        more = sock.recv(65536)
        if not more:
            break
        data += more
    head, _, body = data.partition(b"\r\n\r\n")
    length = re.search(rb"content-length: *(\d+)", head, re.I)
    while length and len(body) < int(length.group(1)):
        more = sock.recv(65536)
        if not more:
            break
        body += more
    code = int(head.split(b" ")[1]) if head.startswith(b"HTTP/") else 0
    return code, json.loads(body) if body else {}


def exchange(kube, data: bytes, tls: bool = True) -> tuple[int, dict]:
    """Send raw bytes (over TLS unless told) and read one answer."""
    with socket.create_connection(kube.server_address, timeout=READ_TIMEOUT + 9) as raw:
        sock = kube.tls.client_context().wrap_socket(raw, server_hostname="127.0.0.1") if tls else raw
        sock.sendall(data)
        return _reply(sock)


def call(kube, method: str, path: str, body=None, *, content_type: str = "application/json", token: str | None = "",
         headers: dict | None = None) -> tuple[int, dict]:
    connection = http.client.HTTPSConnection(*kube.server_address, context=kube.tls.client_context(), timeout=30)
    sent = {"Content-Type": content_type, **(headers or {})}
    if token is not None:
        sent["Authorization"] = f"Bearer {token or kube.token}"
    data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
    try:
        connection.request(method, path, body=data, headers=sent)
        answer = connection.getresponse()
        text = answer.read()
        return answer.status, json.loads(text) if text else {}
    finally:
        connection.close()


def _config_map(name: str = "cm", **more) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, **more}


def _deep(levels: int) -> bytes:
    return b'{"a":' * levels + b"1" + b"}" * levels


BAD_BODIES = {  # name: (path, body, content type, code, reason, words in the message)
    "malformed JSON": (JOBS, b'{"kind": "Job", ', "application/json", 400, "BadRequest", "json parse error"),
    "deeply nested JSON": (JOBS, _deep(5000), "application/json", 400, "BadRequest", "exceeded max depth"),
    "nested past 100 levels": (JOBS, _deep(150), "application/json", 400, "BadRequest", "exceeded max depth"),
    "a JSON array": (JOBS, b"[1, 2]", "application/json", 400, "BadRequest", "cannot unmarshal list"),
    "a YAML body sent as JSON": (JOBS, b"apiVersion: batch/v1\nkind: Job\n", "application/json", 400, "BadRequest",
                                 "json parse error"),
    "YAML with an alias": (CONFIGMAPS, b"kind: ConfigMap\nmetadata: {name: a}\ndata: &d {k: v}\nbinaryData: *d\n",
                           "application/yaml", 400, "BadRequest", "aliases are not supported"),
    "a Pod posted as a Job": (JOBS, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                                     "spec": POD_SPEC}, "application/json", 400, "BadRequest",
                              "the API version in the data (v1) does not match the expected API version (batch/v1)"),
    "a Pod kind in batch/v1": (JOBS, {**JOB, "kind": "Pod"}, "application/json", 400, "BadRequest",
                               'Pod in version "v1" cannot be handled as a Job: no kind "Pod" is registered'),
    "no name": (JOBS, {**JOB, "metadata": {}}, "application/json", 422, "Invalid",
                "metadata.name: Required value: name or generateName is required"),
    "no template": (JOBS, {**JOB, "spec": {}}, "application/json", 422, "Invalid",
                    "spec.template.spec.containers: Required value"),
    "restartPolicy Always": (JOBS, {**JOB, "spec": {"template": {"spec": {**POD_SPEC, "restartPolicy": "Always"}}}},
                             "application/json", 422, "Invalid", 'Unsupported value: "Always"'),
    "a billion completions": (JOBS, {**JOB, "spec": {**JOB["spec"], "completionMode": "Indexed",
                                                     "completions": 10**9}}, "application/json", 422, "Invalid",
                              "spec.completions"),
    "text/plain": (CONFIGMAPS, _config_map(), "text/plain", 415, "UnsupportedMediaType",
                   "accepted media types include: application/json"),
    "a 3 MB ConfigMap": (CONFIGMAPS, _config_map(data={"k": "x" * 3_000_000}), "application/json", 422, "Invalid",
                         "Too long: must have at most 1048576 bytes"),
    "a body over 3 MiB": (CONFIGMAPS, _config_map(data={"k": "x" * 3_200_000}), "application/json", 413,
                          "RequestEntityTooLarge", "Request entity too large: limit is 3145728"),
    "a Job over etcd's 1.5 MiB": (JOBS, {**JOB, "spec": {"template": {"spec": {**POD_SPEC, "containers": [
        {**POD_SPEC["containers"][0], "args": ["x" * 1_600_000]}]}}}}, "application/json", 413,
        "RequestEntityTooLarge", "etcdserver: request is too large"),
    "a traversing name": (CONFIGMAPS, _config_map("../../../../tmp/KTRAV"), "application/json", 422, "Invalid",
                          "a lowercase RFC 1123 subdomain"),
    "an RFC 1123 name it is not": (CONFIGMAPS, _config_map("BAD_Name.ÜNI"), "application/json", 422, "Invalid",
                                   'metadata.name: Invalid value: "BAD_Name.ÜNI"'),
    "a ConfigMap key out of its folder": (CONFIGMAPS, _config_map(data={"../escape": "x"}), "application/json", 422,
                                          "Invalid", "a valid config key"),
    "a namespace named BadNS": ("/api/v1/namespaces", {"kind": "Namespace", "metadata": {"name": "BadNS"}},
                                "application/json", 422, "Invalid", "a lowercase RFC 1123 label"),
    "a 64-character namespace": ("/api/v1/namespaces", {"kind": "Namespace", "metadata": {"name": "n" * 64}},
                                 "application/json", 422, "Invalid", "must be no more than 63 characters"),
    "another namespace in the body": (CONFIGMAPS, _config_map(metadata={"name": "a", "namespace": "other"}),
                                      "application/json", 400, "BadRequest", "does not match the namespace"),
    "a label value with a space": (CONFIGMAPS, _config_map(metadata={"name": "a", "labels": {"k": "a b"}}),
                                   "application/json", 422, "Invalid", "a valid label must be"),
    "a volume named out of its pod's folder": (JOBS, {**JOB, "spec": {"template": {"spec": {
        **POD_SPEC, "volumes": [{"name": "../../x", "configMap": {"name": "cm"}}], "containers": [
            {**POD_SPEC["containers"][0], "volumeMounts": [{"name": "../../x", "mountPath": "/m"}]}]}}}},
        "application/json", 422, "Invalid", 'volumes[0].name: Invalid value: "../../x"'),
    "a TFJob replica type that names a path": ("/apis/kubeflow.org/v1/namespaces/default/tfjobs", {
        "apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": {"name": "tf"},
        "spec": {"tfReplicaSpecs": {"../x": {"replicas": 1, "template": {"spec": POD_SPEC}}}}}, "application/json",
        422, "Invalid", 'spec.tfReplicaSpecs: Unsupported value: "../x"'),
    "a JobSet network that is not an object": ("/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets", {
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "js"},
        "spec": {"network": "x", "replicatedJobs": [{"name": "chief", "template": {"spec": JOB["spec"]}}]}},
        "application/json", 422, "Invalid", 'spec.network: Invalid value: "x": must be an object'),
    "a null container": (JOBS, {**JOB, "spec": {"template": {"spec": {**POD_SPEC, "containers": [None]}}}},
                         "application/json", 422, "Invalid", "containers[0].name: Required value"),
    "maxRestarts past int32": ("/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets", {
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "js"},
        "spec": {"failurePolicy": {"maxRestarts": 99999999999999999999}, "replicatedJobs": [
            {"name": "chief", "replicas": 1, "template": {"spec": JOB["spec"]}}]}}, "application/json", 422,
        "Invalid", "spec.failurePolicy.maxRestarts"),
}


@pytest.mark.parametrize("case", list(BAD_BODIES))
def test_a_bad_body_gets_the_api_servers_status_and_stores_nothing(kube, case):
    path, body, content_type, code, reason, words = BAD_BODIES[case]
    before = set(kube.store.objects)
    status, answer = call(kube, "POST", path, body, content_type=content_type)
    assert (status, answer.get("kind"), answer.get("code"), answer.get("reason")) == (code, "Status", code, reason), \
        answer
    assert words in answer["message"]
    assert set(kube.store.objects) == before
    assert call(kube, "GET", "/version")[0] == 200  # and it keeps serving


def _request(head: str, body: bytes = b"", token: str | None = None) -> bytes:
    return head.encode() + (f"Authorization: Bearer {token}\r\n".encode() if token else b"") + b"\r\n" + body


@pytest.mark.parametrize("case, code, reason, words", [
    ("bad chunk size", 400, "BadRequest", "invalid byte in chunk length"),
    ("chunk longer than its size", 400, "BadRequest", "does not end where its size says"),
    ("garbage request line", 400, "BadRequest", ""),
    ("bad Content-Length", 400, "BadRequest", "bad Content-Length"),
    ("unknown method", 405, "MethodNotAllowed", "does not allow this method"),
    ("request line over 64 KiB", 414, "BadRequest", ""),
    ("gzip body", 415, "UnsupportedMediaType", "unknown format"),
    ("bad labelSelector", 400, "BadRequest", "unable to parse requirement"),
    ("bad list chunk size (limit)", 400, "BadRequest", "invalid value for limit"),
    ("bad watch timeout", 400, "BadRequest", "invalid value for timeoutSeconds"),
])
def test_whatever_arrives_on_the_wire_gets_a_status(kube, case, code, reason, words):
    token, post = kube.token, f"POST {JOBS} HTTP/1.1\r\nHost: k\r\nContent-Type: application/json\r\n"
    data = {
        "bad chunk size": _request(post + "Transfer-Encoding: chunked\r\n", b"zz\r\n{}\r\n0\r\n\r\n", token),
        "chunk longer than its size": _request(post + "Transfer-Encoding: chunked\r\n", b"2\r\n{}}}\r\n0\r\n\r\n",
                                               token),
        "garbage request line": b"\x16GARBAGE\x00\xff nonsense\r\n\r\n",
        "bad Content-Length": _request(post + "Content-Length: -5\r\n", b"{}", token),
        "unknown method": _request(f"BREW {JOBS} HTTP/1.1\r\nHost: k\r\n", b"", token),
        "request line over 64 KiB": f"GET /{'a' * 70_000} HTTP/1.1\r\n\r\n".encode(),
        "gzip body": _request(post + "Content-Encoding: gzip\r\nContent-Length: 2\r\n", b"\x1f\x8b", token),
        "bad labelSelector": _request(f"GET {JOBS}?labelSelector=%3Dx HTTP/1.1\r\nHost: k\r\n", b"", token),
        "bad list chunk size (limit)": _request(f"GET {JOBS}?limit=ten HTTP/1.1\r\nHost: k\r\n", b"", token),
        "bad watch timeout": _request(f"GET {JOBS}?watch=true&timeoutSeconds=-1 HTTP/1.1\r\nHost: k\r\n", b"", token),
    }[case]
    before = set(kube.store.objects)
    status, answer = exchange(kube, data)
    assert (status, answer.get("kind"), answer.get("reason")) == (code, "Status", reason), answer
    assert words in answer["message"]
    assert set(kube.store.objects) == before and call(kube, "GET", "/version")[0] == 200


def test_a_stalled_body_gets_408_and_plain_http_gets_400(kube):
    started = time.monotonic()
    status, answer = exchange(kube, _request(f"POST {JOBS} HTTP/1.1\r\nHost: k\r\nContent-Length: 100\r\n", b"{",
                                             kube.token))
    assert (status, answer["reason"]) == (408, "Timeout") and time.monotonic() - started < READ_TIMEOUT + 5
    status, answer = exchange(kube, f"GET {JOBS} HTTP/1.1\r\nHost: k\r\n\r\n".encode(), tls=False)
    assert (status, answer["message"]) == (400, "Client sent an HTTP request to an HTTPS server.")
    # a client that never says anything holds only its own thread: the others are served meanwhile
    with socket.create_connection(kube.server_address):
        assert call(kube, "GET", "/version")[0] == 200


def test_nothing_answers_or_runs_without_the_token(kube):
    before = set(kube.store.objects)
    for token in (None, "wrong", kube.token[:-1]):
        for method, path, body in (("POST", JOBS, JOB), ("GET", JOBS, None), ("GET", "/version", None),
                                   ("GET", "/openapi/v3", None)):
            status, answer = call(kube, method, path, body, token=token)
            assert (status, answer["reason"], answer["message"]) == (401, "Unauthorized", "Unauthorized"), answer
    assert set(kube.store.objects) == before
    # the token is only in the kubeconfig, which only its owner can read
    assert stat.S_IMODE(kube.kubeconfig.stat().st_mode) == 0o600
    assert stat.S_IMODE(kube.kubeconfig.parent.stat().st_mode) == 0o700
    # another user's kubectl, pointed at the port without the kubeconfig, gets Unauthorized
    other = subprocess.run([KUBECTL, "--server", kube.url, "--insecure-skip-tls-verify", "--token", "guessed",
                            "get", "jobs"], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert other.returncode == 1 and "You must be logged in to the server" in other.stderr, other.stderr
    # the owner's kubectl and Python client read the kubeconfig: https, the certificate, the token
    mine = subprocess.run([KUBECTL, "--kubeconfig", str(kube.kubeconfig), "get", "namespaces", "-o", "name"],
                          capture_output=True, text=True, timeout=60)
    assert mine.returncode == 0 and "namespace/default" in mine.stdout, mine.stderr
    from kubernetes import client, config

    api = config.new_client_from_config(config_file=str(kube.kubeconfig))
    assert [n.metadata.name for n in client.CoreV1Api(api).list_namespace().items] == ["default"]


def test_kubectl_gets_the_api_servers_refusals_and_updates(kube, tmp_path):
    def kubectl(*args, stdin=None):
        return subprocess.run([KUBECTL, "--kubeconfig", str(kube.kubeconfig), *args], input=stdin,
                              capture_output=True, text=True, timeout=60)

    bad = kubectl("apply", "-f", "-", stdin="apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: BAD_Name.ÜNI\n")
    assert bad.returncode == 1 and 'The ConfigMap "BAD_Name.ÜNI" is invalid: metadata.name: Invalid value' in \
        bad.stderr, bad.stderr
    good = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kept\n  labels: {app: a}\ndata:\n  k: v\n"
    assert "configmap/kept created" in kubectl("apply", "-f", "-", stdin=good).stdout
    assert "configmap/kept unchanged" in kubectl("apply", "-f", "-", stdin=good).stdout
    changed = kubectl("apply", "-f", "-", stdin=good.replace("k: v", "k: w"))
    assert "configmap/kept configured" in changed.stdout, changed.stderr
    assert kubectl("get", "cm", "-l", "app in (a,b)", "-o", "jsonpath={.items[*].data.k}").stdout == "w"
    too_big = kubectl("apply", "-f", "-", stdin=good.replace("k: v", f"k: {'x' * 1_100_000}"))
    assert too_big.returncode == 1 and "Too long: must have at most 1048576 bytes" in too_big.stderr
    assert kubectl("delete", "cm", "kept").returncode == 0


def _mlsubmit(*args, kubeconfig, timeout=60):
    env = {**os.environ, "NO_COLOR": "1", "KUBECONFIG": str(kubeconfig)}
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "mlsubmit", *args], env=env, capture_output=True, text=True,
                          timeout=timeout)
    return done, time.monotonic() - started


def _refused(done, words):
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stdout + done.stderr
    assert words in done.stderr, done.stderr


@pytest.mark.parametrize("content, words", [
    ("apiVersion: v1\nclusters: [ {name: x\n", "it is not valid YAML (expected ',' or '}'"),
    ("[1, 2]\n", "it is not a kubeconfig"),
    ("clusters: 5\ncontexts: 7\ncurrent-context: x\n", "it is not a kubeconfig"),
    (None, "Is a directory"),
])
def test_an_unusable_kubeconfig_is_one_line(tmp_path, content, words):
    """train for each kind of unusable file; `jobs list`, which reads it through the same loader
    (mlsubmit.targets.kubernetes.load_kubeconfig) after its own look at the contexts, for one of them."""
    path = tmp_path
    if content is not None:
        path = tmp_path / "kubeconfig"
        path.write_text(content)
    commands = [["train", "--target", "kubernetes", "--package-path", TRAINER, "--job-name", "x"]]
    if content == "[1, 2]\n":
        commands.append(["jobs", "list", "--api", "kubernetes"])
    for command in commands:
        done, _ = _mlsubmit(*command, kubeconfig=path)
        _refused(done, f"cannot read the kubeconfig {path}: {words}")


def test_train_refusals_create_nothing(kube, tmp_path):
    before = set(kube.store.objects)
    train = ["train", "--target", "kubernetes", "--package-path", TRAINER, "--job-name", "refused"]
    cases = [(["--k8s-api", "jobset", "--max-restarts", "99999999999999999999"], "from 0 to 2147483647"),
             (["--namespace", "BadNS"], "invalid value for --namespace: received 'BadNS'"),
             (["--namespace", "n" * 64], "expected a Kubernetes namespace: 1 to 63")]
    for more, words in cases:
        done, _ = _mlsubmit(*train, *more, kubeconfig=kube.kubeconfig)
        _refused(done, words)
    stranger = tmp_path / "kubeconfig"
    stranger.write_text(kube.kubeconfig.read_text().replace(kube.token, "not-the-token"))
    done, _ = _mlsubmit(*train, kubeconfig=stranger)
    _refused(done, "refuses your credentials (401 Unauthorized)")
    assert set(kube.store.objects) == before


def test_config_never_cuts_a_name_and_refuses_bad_namespaces(kube, tmp_path):
    base = ["config", "--format", "kubernetes", "--tier", "CUSTOM", "--workers", "1", "--package-uris",
            "gs://b/t.tar.gz", "--job-name"]
    long = "resnet-imagenet-lr-sweep-learning-rate-0.01-seed-"
    names = []
    for seed in ("1", "2"):
        done, _ = _mlsubmit(*base, long + seed, kubeconfig=kube.kubeconfig)
        assert done.returncode == 0, done.stderr
        name = re.search(r"mlsubmit.dev/job=(\S+) to remove", done.stdout).group(1)
        assert len(name) <= 40 and f"its objects are named '{name}'" in done.stderr
        (tmp_path / f"{seed}.yaml").write_text(done.stdout)
        names.append(name)
    assert names[0] != names[1]  # two jobs, never one overwriting the other
    for seed in ("1", "2"):  # the API server takes every object as it is (dry run: nothing runs)
        applied = subprocess.run([KUBECTL, "--kubeconfig", str(kube.kubeconfig), "apply", "--dry-run=server", "-f",
                                  str(tmp_path / f"{seed}.yaml")], capture_output=True, text=True, timeout=60)
        assert applied.returncode == 0 and "(server dry run)" in applied.stdout, applied.stderr
    kept, _ = _mlsubmit(*base, "mnist-k8s", kubeconfig=kube.kubeconfig)
    assert "mlsubmit.dev/job=mnist-k8s " in kept.stdout and "note" not in kept.stderr  # a valid name is kept as is
    for namespace in ("BadNS", "n" * 64, "../x"):
        done, _ = _mlsubmit(*base, "x", "--namespace", namespace, kubeconfig=kube.kubeconfig)
        _refused(done, "invalid value for --namespace")
        assert done.stdout == ""


SILENT_TEST = "test_a_silent_api_server_is_refused_within_the_promised_10_s"


@pytest.fixture(scope="module", autouse=True)
def silent_api_server(request, tmp_path_factory):
    """`train` against an API server that accepts and never answers waits out the promised 10 s: it starts with the
    module's first test and waits beside the others (it hardly computes) rather than alone; SILENT_TEST reads it."""
    if not any(item.name == SILENT_TEST for item in request.session.items):
        yield None
        return
    with socket.socket() as silent, ThreadPoolExecutor(1) as pool:  # accepts connections, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        config = tmp_path_factory.mktemp("silent") / "kubeconfig"
        config.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "s",
            "clusters": [{"name": "s", "cluster": {"server": f"http://127.0.0.1:{silent.getsockname()[1]}"}}],
            "users": [{"name": "s", "user": {}}],
            "contexts": [{"name": "s", "context": {"cluster": "s", "user": "s"}}]}))
        yield pool.submit(_mlsubmit, "train", "--target", "kubernetes", "--package-path", TRAINER, "--job-name", "x",
                          kubeconfig=config)


def test_a_silent_api_server_is_refused_within_the_promised_10_s(silent_api_server):
    done, seconds = silent_api_server.result(timeout=120)  # timed from its own start to its own end
    _refused(done, "no answer within 10 s")
    assert seconds < 15


def test_updates_pass_the_same_checks_and_keep_a_running_objects_spec(kube):
    merge = "application/merge-patch+json"
    assert call(kube, "POST", CONFIGMAPS, _config_map("patched", data={"a": "1", "b": "2"}))[0] == 201
    status, merged = call(kube, "PATCH", f"{CONFIGMAPS}/patched", {"data": {"a": None, "c": "3"}}, content_type=merge)
    assert status == 200 and merged["data"] == {"b": "2", "c": "3"} and merged["metadata"]["uid"]
    status, answer = call(kube, "PATCH", f"{CONFIGMAPS}/patched", {"data": {"../x": "1"}}, content_type=merge)
    assert (status, answer["reason"]) == (422, "Invalid") and "a valid config key" in answer["message"]
    status, answer = call(kube, "PATCH", f"{CONFIGMAPS}/patched", {"metadata": {"name": "other"}}, content_type=merge)
    assert status == 422 and "field is immutable" in answer["message"]
    status, answer = call(kube, "PATCH", f"{CONFIGMAPS}/patched", [{"op": "remove", "path": "/data"}],
                          content_type="application/json-patch+json")
    assert (status, answer["reason"]) == (415, "UnsupportedMediaType")
    status, answer = call(kube, "PUT", f"{CONFIGMAPS}/patched", _config_map("renamed"))
    assert status == 400 and "does not match the name on the URL" in answer["message"]
    assert call(kube, "DELETE", f"{CONFIGMAPS}/patched")[0] == 200
    job = {**JOB, "metadata": {"name": "patched-job"}}
    assert call(kube, "POST", JOBS, job)[0] == 201
    status, answer = call(kube, "PATCH", f"{JOBS}/patched-job", {"spec": {"backoffLimit": 3}}, content_type=merge)
    assert status == 422 and "field is immutable" in answer["message"]
    status, labelled = call(kube, "PATCH", f"{JOBS}/patched-job", {"metadata": {"labels": {"seen": "yes"}}},
                            content_type=merge)
    assert status == 200 and labelled["metadata"]["labels"] == {"seen": "yes"}
    assert call(kube, "DELETE", f"{JOBS}/patched-job")[0] == 200


def test_label_selectors_as_the_api_server_reads_them():
    from mlsubmit.emulator.kube_api import _matches, parse_selector
    from mlsubmit.emulator.kube_wire import ApiStatus

    labels = {"app": "a", "tier": "db"}
    for selector, matches in (("app=a", True), ("app==a,tier=db", True), ("app!=a", False), ("ghost!=a", True),
                              ("app", True), ("!app", False), ("app in (a, b)", True), ("tier notin (db)", False),
                              ("", True)):
        assert _matches(labels, parse_selector(selector)) is matches, selector
    for selector in ("=x", "app=a,,", "a b"):
        with pytest.raises(ApiStatus, match="unable to parse requirement"):
            parse_selector(selector)


def test_kubernetes_names_are_kept_or_derived_never_cut():
    from mlsubmit.kube import manifests as m

    assert m.kube_name("mnist-k8s") == "mnist-k8s" and m.name_note("mnist-k8s", "mnist-k8s") is None
    derived = {name: m.kube_name(name) for name in ("mnist_k8s", "MNIST-k8s", "mnist-k8s-", "a" * 41, "x" * 41 + "y",
                                                     "BAD_Name.ÜNI", "../../x/KTRAV", "123", "___")}
    assert len(set(derived.values())) == len(derived)  # unique: a hash of the whole name ends each
    for name, kube_name in derived.items():
        assert re.fullmatch(r"[a-z][a-z0-9-]{0,30}-[0-9a-f]{8}", kube_name), (name, kube_name)
        assert kube_name in m.name_note(name, kube_name)
    assert derived["mnist_k8s"].startswith("mnist-k8s-") and derived["BAD_Name.ÜNI"].startswith("bad-name-ni-")
    assert re.fullmatch(r"tinypkg-\d{8}-\d{6}-[0-9a-f]{6}", m.default_name("tinypkg"))
    assert len(m.default_name("a-very-long-distribution-name")) <= m.MAX_NAME


def test_the_emulator_command_hands_the_token_over_in_a_kubeconfig(gcs_emulator, tmp_path):
    from support.training_emulator import start_emulator_command

    process, text = start_emulator_command([sys.executable, "-m", "mlsubmit", "emulator", "--port", "0", "--quiet",
                                            "--gcs-endpoint", gcs_emulator.endpoint, "--kube-port", "0"], tmp_path)
    try:
        url = re.search(r"Kubernetes API on (https://127\.0\.0\.1:\d+)", text).group(1)
        config = re.search(r"export KUBECONFIG=(\S+)", text).group(1)
        assert stat.S_IMODE(os.stat(config).st_mode) == 0o600 and json.loads(open(config).read())["clusters"][0][
            "cluster"]["server"] == url
        listed = subprocess.run([KUBECTL, "get", "namespaces", "-o", "name"], env={**os.environ, "KUBECONFIG": config},
                                capture_output=True, text=True, timeout=60)
        assert listed.returncode == 0 and listed.stdout.strip() == "namespace/default", listed.stderr
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0
        assert not os.path.exists(config)  # the token goes with the emulator
    finally:
        if process.poll() is None:
            process.kill()


def test_a_config_map_kubernetes_would_refuse_is_refused_before_sending():
    from mlsubmit.errors import UsageError
    from mlsubmit.kube import validate

    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big-launcher"},
                  "data": {"replica.py": "x" * (1024 * 1024 + 1)}}
    with pytest.raises(UsageError, match="'big-launcher' would hold 1048577 bytes; Kubernetes takes at most 1048576"):
        validate.validate([config_map])


def test_a_watch_from_a_lists_version_streams_each_change_then_ends_at_its_timeout(kube):
    """The official client's Watch (kubectl's `get -w` and `wait` watch the same way): what changed after the list's
    resourceVersion, one event a change, as it happens; the stream ends at timeoutSeconds."""
    from kubernetes import client, config, watch

    config.load_kube_config(config_file=str(kube.kubeconfig))
    core = client.CoreV1Api()
    listed = core.list_namespaced_config_map("default", label_selector="watched=yes")
    made = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "watched", "labels": {"watched": "yes"}},
            "data": {"seen": "0"}}
    assert call(kube, "POST", CONFIGMAPS, made)[0] == 201
    next_step = {"ADDED": lambda: call(kube, "PATCH", f"{CONFIGMAPS}/watched", {"data": {"seen": "1"}},
                                       content_type="application/merge-patch+json"),
                 "MODIFIED": lambda: call(kube, "DELETE", f"{CONFIGMAPS}/watched"), "DELETED": lambda: (200, {})}
    started, events = time.monotonic(), []
    for event in watch.Watch().stream(core.list_namespaced_config_map, "default", label_selector="watched=yes",
                                      timeout_seconds=3, resource_version=listed.metadata.resource_version):
        events.append((event["type"], event["object"].data["seen"]))
        assert next_step[event["type"]]()[0] == 200
    assert events == [("ADDED", "0"), ("MODIFIED", "1"), ("DELETED", "1")]
    assert 2.5 < time.monotonic() - started < 15 and ("configmaps", "default", "watched") not in kube.store.objects
