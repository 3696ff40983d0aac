"""A Kubernetes API subset on 127.0.0.1, enough for `kubectl apply/get/logs/delete` and the `kubernetes` Python client:
discovery (/version, /api, /apis, /api/v1, /apis/batch/v1), namespaces (`default` exists), ConfigMaps, Services,
batch/v1 Jobs (create, get, list by labelSelector, delete with propagationPolicy), jobset.x-k8s.io/v1alpha2 JobSets
(the same verbs; their controller is mlsubmit.emulator.kube_jobset), kubeflow.org/v1 TFJobs (the Training Operator:
mlsubmit.emulator.kube_tfjob), Pods (list, get, `log` with follow), OpenAPI v3 (mlsubmit.emulator.kube_openapi). The
Job controller is mlsubmit.emulator.kube_jobs; pods run as local processes (mlsubmit.emulator.kube_pods). `forbid` makes every request answer 403, as a cluster whose
RBAC refuses the user would.

    server = KubeServer(port=0).start()   # server.url; server.stop() stops every pod
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

from mlsubmit.emulator import kube_jobs, kube_jobset, kube_openapi, kube_pods, kube_tfjob

VERSION = {"major": "1", "minor": "33", "gitVersion": "v1.33.0", "platform": "linux/amd64"}
CORE = {"namespaces": ("Namespace", False), "configmaps": ("ConfigMap", True), "services": ("Service", True),
        "pods": ("Pod", True)}
BATCH = {"jobs": ("Job", True)}
TABLES = {"/api/v1": (CORE, "v1"), "/apis/batch/v1": (BATCH, "batch/v1"),
          "/apis/" + kube_jobset.GROUP_VERSION: (kube_jobset.RESOURCES, kube_jobset.GROUP_VERSION),
          "/apis/" + kube_tfjob.GROUP_VERSION: (kube_tfjob.RESOURCES, kube_tfjob.GROUP_VERSION)}
_PATH = re.compile(r"^(?P<prefix>/api/v1|/apis/batch/v1|/apis/jobset\.x-k8s\.io/v1alpha2|/apis/kubeflow\.org/v1)"
                   r"(?:/namespaces/(?P<ns>[^/]+))?/(?P<plural>[a-z]+)(?:/(?P<name>[^/]+))?(?:/(?P<sub>log|status))?$")


_now = kube_jobs.now


def _status(code: int, reason: str, message: str, **details: Any) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": reason, "details": details, "code": code}


def _resources(table: dict[str, tuple[str, bool]], group: str) -> dict[str, Any]:
    verbs = ["create", "delete", "get", "list", "patch", "update", "watch"]
    short = {"namespaces": ["ns"], "configmaps": ["cm"], "services": ["svc"], "pods": ["po"]}
    items = [{"name": plural, "singularName": kind.lower(), "namespaced": namespaced, "kind": kind, "verbs": verbs,
              "shortNames": short.get(plural, [])} for plural, (kind, namespaced) in table.items()]
    if "pods" in table:
        items.append({"name": "pods/log", "singularName": "", "namespaced": True, "kind": "Pod", "verbs": ["get"]})
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group, "resources": items}


def _matches(labels: dict[str, str], selector: str) -> bool:
    for term in filter(None, (s.strip() for s in selector.split(","))):
        key, op, value = re.match(r"([^!=]+)(==|=|!=)?(.*)", term).groups()
        if op is None:
            if key not in labels:
                return False
        elif (labels.get(key) == value) != (op != "!="):
            return False
    return True


class Store(kube_jobs.JobController):
    """The objects by (plural, namespace, name); the Job controller (kube_jobs) and its pods; the JobSet controller."""

    def __init__(self, root: Path):
        self.root = root
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.pods: dict[tuple[str, str], kube_pods.Pod] = {}
        self.lock = threading.RLock()
        self.version = 1
        self.jobsets = kube_jobset.Controller(self)
        self.tfjobs = kube_tfjob.Controller(self)
        self.add("namespaces", "", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"},
                                    "status": {"phase": "Active"}})

    def add(self, plural: str, ns: str, obj: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            self.version += 1
            meta = obj.setdefault("metadata", {})
            meta.update(uid=meta.get("uid") or str(uuid.uuid4()), resourceVersion=str(self.version),
                        creationTimestamp=meta.get("creationTimestamp") or _now())
            if ns:
                meta["namespace"] = ns
            self.objects[(plural, ns, meta["name"])] = obj
            return obj

    def items(self, plural: str, ns: str | None, selector: str = "") -> list[dict[str, Any]]:
        with self.lock:
            return [o for (p, n, _), o in self.objects.items() if p == plural and (ns is None or n == ns)
                    and _matches(o["metadata"].get("labels", {}), selector)]

    def stop(self) -> None:
        for runner in list(self.pods.values()):
            runner.stop()
        for runner in list(self.pods.values()):
            runner.done.wait(10)


class _Handler(BaseHTTPRequestHandler):
    server: "KubeServer"
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, code: int, body: Any, content_type: str = "application/json") -> None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> dict[str, Any]:
        """The request's JSON body, read once (a connection carries many requests: reset in _route)."""
        if self._read is None:
            self._read = json.loads(self._body_bytes() or b"{}")
        return self._read

    def _body_bytes(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":  # Go's client when it knows no length
            data = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                chunk = self.rfile.read(size + 2)[:size]
                if not size:
                    break
                data += chunk
        else:
            data = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        return data

    def do_GET(self) -> None:
        self._route("GET")

    def do_POST(self) -> None:
        self._route("POST")

    def do_DELETE(self) -> None:
        self._route("DELETE")

    def do_PUT(self) -> None:
        self._route("PUT")

    def do_PATCH(self) -> None:
        self._route("PATCH")

    def _route(self, method: str) -> None:
        url = urlparse(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        path = url.path.rstrip("/") or "/"
        self._read: dict[str, Any] | None = None
        try:
            if method in ("POST", "PUT", "PATCH") and "protobuf" in self.headers.get("Content-Type", ""):
                self._body_bytes()  # kubectl create sends protobuf for built-in kinds: not read here
                return self._send(415, _status(415, "UnsupportedMediaType", "this emulated Kubernetes API reads "
                                               "JSON only: use kubectl apply -f FILE"))
            if self.server.forbid:
                verb = {"GET": "get", "POST": "create", "DELETE": "delete"}.get(method, method.lower())
                return self._send(403, _status(403, "Forbidden", f'{path} is forbidden: User "emulated" cannot '
                                               f"{verb} the resource at this path"))
            fixed = self.server.discovery(path)
            if fixed is not None and method == "GET":
                return self._send(200, fixed)
            match = _PATH.match(path)
            if match is None:
                return self._send(404, _status(404, "NotFound", f"the server could not find {path}"))
            self.server.api(self, method, match, query)
        except (BrokenPipeError, ConnectionResetError):
            pass


class KubeServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, port: int = 0, host: str = "127.0.0.1"):
        super().__init__((host, port), _Handler)
        self.forbid = False
        self.serve_jobsets = True  # False: a cluster without the JobSet controller
        self.serve_tfjobs = True  # False: a cluster without the Training Operator
        self._root = Path(tempfile.mkdtemp(prefix="mlsubmit-kube-"))
        self.store = Store(self._root)
        self.url = f"http://{host}:{self.server_address[1]}"

    def start(self) -> "KubeServer":
        threading.Thread(target=self.serve_forever, daemon=True, name="kube-api").start()
        return self

    def stop(self) -> None:
        self.shutdown()
        self.server_close()
        self.store.stop()
        shutil.rmtree(self._root, ignore_errors=True)

    def _tables(self) -> dict[str, tuple[dict[str, tuple[str, bool]], str]]:
        off = {kube_jobset.GROUP_VERSION: not self.serve_jobsets, kube_tfjob.GROUP_VERSION: not self.serve_tfjobs}
        return {p: t for p, t in TABLES.items() if not off.get(t[1])}

    def discovery(self, path: str) -> Any:
        host = f"127.0.0.1:{self.server_address[1]}"
        return {
            "/version": VERSION,
            "/api": {"kind": "APIVersions", "versions": ["v1"],
                     "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": host}]},
            "/apis": {"kind": "APIGroupList", "apiVersion": "v1", "groups": [{
                "name": gv.partition("/")[0], "versions": [{"groupVersion": gv, "version": gv.partition("/")[2]}],
                "preferredVersion": {"groupVersion": gv, "version": gv.partition("/")[2]}}
                for _, gv in list(self._tables().values())[1:]]},
            **{prefix: _resources(table, gv) for prefix, (table, gv) in self._tables().items()},
            "/openapi/v3": kube_openapi.index(self._tables()),
            **{"/openapi/v3" + prefix: kube_openapi.document(prefix, table, gv)
               for prefix, (table, gv) in self._tables().items()},
        }.get(path)

    # -- the REST verbs ----------------------------------------------------------------------------------
    def api(self, handler: _Handler, method: str, match: re.Match, query: dict[str, str]) -> None:
        ns, plural, name, sub = match["ns"], match["plural"], match["name"], match["sub"]
        table, group_version = self._tables().get(match["prefix"], ({}, ""))
        if plural not in table:
            return handler._send(404, _status(404, "NotFound", f"the server could not find the resource {plural}"))
        kind, namespaced = table[plural]
        store = self.store
        if namespaced and ns is not None and ("namespaces", "", ns) not in store.objects:
            return handler._send(404, _status(404, "NotFound", f'namespaces "{ns}" not found', name=ns,
                                              kind="namespaces"))
        key_ns = ns or ""
        if method == "GET" and name is None:
            items = store.items(plural, ns if namespaced else None, query.get("labelSelector", ""))
            field = query.get("fieldSelector", "")
            if field.startswith("metadata.name="):
                items = [i for i in items if i["metadata"]["name"] == field.split("=", 1)[1]]
            if query.get("watch") in ("true", "1"):
                return self._watch(handler, items, query)
            return handler._send(200, {"kind": f"{kind}List", "apiVersion": group_version,
                                       "metadata": {"resourceVersion": str(store.version)}, "items": items})
        if method in ("POST", "PUT") and query.get("fieldValidation") == "Strict":  # kubectl's default
            refused = kube_openapi.refusal(handler._body(), f"{VERSION['major']}.{VERSION['minor']}")
            if refused is not None:
                return handler._send(refused[0], _status(*refused))
        if method == "POST" and name is None:
            obj = handler._body()
            obj_name = obj.get("metadata", {}).get("name")
            with store.lock:
                if (plural, key_ns, obj_name) in store.objects:
                    return handler._send(409, _status(409, "AlreadyExists", f'{plural} "{obj_name}" already exists',
                                                      name=obj_name, kind=plural))
                if query.get("dryRun"):
                    return handler._send(201, obj)
                store.add(plural, key_ns, obj)
                if plural == "jobs":
                    store.start_job(key_ns, obj)
                elif plural == "jobsets":
                    store.jobsets.create(key_ns, obj)
                elif plural == "tfjobs":
                    store.tfjobs.create(key_ns, obj)
            return handler._send(201, obj)
        obj = store.objects.get((plural, key_ns, name))
        if obj is None:
            return handler._send(404, _status(404, "NotFound", f'{plural.rstrip("s")}s "{name}" not found',
                                              name=name, kind=plural))
        if method == "GET" and sub == "log":
            return self._log(handler, key_ns, name, query)
        if method == "GET":
            return handler._send(200, obj)
        if method == "DELETE":
            options = handler._body()  # DeleteOptions; Orphan keeps a Job's pods, as a cluster does
            policy = options.get("propagationPolicy") or query.get("propagationPolicy") or "Background"
            return self._delete(handler, plural, key_ns, name, obj, orphan=policy == "Orphan")
        if method in ("PUT", "PATCH"):
            body = handler._body()
            if plural not in ("jobs", "jobsets", "tfjobs"):
                obj.update({k: v for k, v in body.items() if k in ("data", "metadata", "spec")})
            return handler._send(200, obj)
        return handler._send(405, _status(405, "MethodNotAllowed", f"{method} is not supported here"))

    def _delete(self, handler: _Handler, plural: str, ns: str, name: str, obj: dict[str, Any],
                orphan: bool = False) -> None:
        store = self.store
        if plural == "jobs" and not orphan:
            store.stop_pods(ns, obj["metadata"]["uid"], remove=True, wait=20)
        elif plural == "jobsets" and not orphan:
            store.jobsets.delete(ns, obj)
        elif plural == "tfjobs" and not orphan:
            store.tfjobs.delete(ns, obj)
        elif plural == "pods":
            runner = store.pods.get((ns, name))
            if runner is not None:
                runner.stop()
                runner.done.wait(20)
        with store.lock:
            store.objects.pop((plural, ns, name), None)
            store.pods.pop((ns, name), None) if plural == "pods" else None
        handler._send(200, obj)  # as the API server answers a delete: the object as it was

    def _watch(self, handler: _Handler, items: list[dict[str, Any]], query: dict[str, str]) -> None:
        lines = b"".join(json.dumps({"type": "ADDED", "object": i}).encode() + b"\n" for i in items)
        handler._send(200, lines, "application/json")

    def _log(self, handler: _Handler, ns: str, name: str, query: dict[str, str]) -> None:
        runner = self.store.pods.get((ns, name))
        if runner is None:
            return handler._send(200, b"", "text/plain")
        if query.get("follow") not in ("true", "1"):
            return handler._send(200, bytes(runner.log), "text/plain")
        handler.send_response(200)
        handler.send_header("Content-Type", "text/plain")
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        sent = 0
        while True:
            finished = runner.done.is_set()
            data = bytes(runner.log[sent:])
            if data:
                handler.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                handler.wfile.flush()
                sent += len(data)
            if finished:
                break
            time.sleep(0.1)
        handler.wfile.write(b"0\r\n\r\n")
