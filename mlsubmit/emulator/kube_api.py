"""A Kubernetes API subset on 127.0.0.1, enough for `kubectl apply/get/logs/delete` and the `kubernetes` Python client:
discovery (/version, /api, /apis, /api/v1, /apis/batch/v1), namespaces (`default` exists), ConfigMaps, Services,
batch/v1 Jobs (create, get, list by labelSelector, delete with propagationPolicy), jobset.x-k8s.io/v1alpha2 JobSets
(the same verbs; their controller is mlsubmit.emulator.kube_jobset), kubeflow.org/v1 TFJobs (the Training Operator:
mlsubmit.emulator.kube_tfjob), Pods (list, get, `log` with follow), a watch of any list (`watch=true`: `kubectl get -w`,
`kubectl wait`, the client's Watch), OpenAPI v3 (mlsubmit.emulator.kube_openapi). The
Job controller is mlsubmit.emulator.kube_jobs; pods run as local processes (mlsubmit.emulator.kube_pods).

A Job's pods run their command on this machine, so the API answers only to the bearer token the server makes at
start (401 Unauthorized otherwise, for every path): it is written, with the server's https:// address and the
certificate it made at start, into a kubeconfig that only its owner can read (`server.kubeconfig`, mode 0600 in a
0700 folder) — what kubectl (`--kubeconfig` or KUBECONFIG), the kubernetes Python client and `mlsubmit train
--target kubernetes` read. HTTPS because kubectl sends a kubeconfig's token only over TLS. Another local user, or a
web page posting to 127.0.0.1, has no token. The wire (bodies, media types, limits, Status answers) is
mlsubmit.emulator.kube_wire; what a create or update must pass before it is stored is mlsubmit.emulator.
kube_admission. `forbid` makes every request answer 403, as a cluster whose RBAC refuses the user would.

    server = KubeServer(port=0).start()   # server.url, server.kubeconfig; server.stop() stops every pod
"""

from __future__ import annotations

import copy
import json
import os
import re
import secrets
import select
import shutil
import tempfile
import threading
import time
import uuid
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable
from urllib.parse import parse_qs, urlparse

from mlsubmit.emulator import (kube_admission, kube_jobs, kube_jobset, kube_openapi, kube_pods, kube_tfjob, kube_wire,
                               reaper)
from mlsubmit.emulator.kube_wire import ApiStatus

ROOT_NAME = "mlsubmit-kube"  # its temporary folder: `mlsubmit-kube-PID-START-…` (mlsubmit.emulator.reaper)
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
WATCH_SECONDS = 1800  # a watch without timeoutSeconds ends after this, as kube-apiserver's --min-request-timeout
WATCH_POLL = 0.2  # how often a watch looks for changes (the objects change in place, from the controllers' threads)
_OWNED = ("jobs", "jobsets", "tfjobs")  # kinds a controller runs: their spec cannot change once created
_TERM = re.compile(r"\s*(?P<not>!)?\s*(?P<key>[A-Za-z0-9][-A-Za-z0-9_./]*)\s*"  # one requirement of a labelSelector
                   r"(?:(?P<op>==|=|!=)\s*(?P<value>[-A-Za-z0-9_.]*)|\s+(?P<set>in|notin)\s*\((?P<values>[^()]*)\))?"
                   r"\s*(?:,|$)")


def _resources(table: dict[str, tuple[str, bool]], group: str) -> dict[str, Any]:
    verbs = ["create", "delete", "get", "list", "patch", "update", "watch"]
    short = {"namespaces": ["ns"], "configmaps": ["cm"], "services": ["svc"], "pods": ["po"]}
    items = [{"name": plural, "singularName": kind.lower(), "namespaced": namespaced, "kind": kind, "verbs": verbs,
              "shortNames": short.get(plural, [])} for plural, (kind, namespaced) in table.items()]
    if "pods" in table:
        items.append({"name": "pods/log", "singularName": "", "namespaced": True, "kind": "Pod", "verbs": ["get"]})
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group, "resources": items}


def parse_selector(selector: str) -> list[tuple[str, str, tuple[str, ...]]]:
    """A labelSelector's requirements (key, operator, values), or 400 BadRequest as the API server words it."""
    text, found, at = selector.strip(), [], 0
    while at < len(text):
        match = _TERM.match(text, at)
        if match is None or match.end() == at:
            raise ApiStatus(400, f"unable to parse requirement: {text[at:at + 60]!r}")
        at = match.end()
        key = match["key"]
        if match["op"]:
            found.append((key, "!=" if match["op"] == "!=" else "=", (match["value"],)))
        elif match["set"]:
            found.append((key, match["set"], tuple(v.strip() for v in match["values"].split(","))))
        else:
            found.append((key, "!" if match["not"] else "exists", ()))
    return found


def _matches(labels: dict[str, str], requirements: list[tuple[str, str, tuple[str, ...]]]) -> bool:
    for key, op, values in requirements:
        value = labels.get(key)
        if op in ("exists", "in") and value is None or op == "!" and value is not None:
            return False
        if op in ("=", "in") and value not in values or op in ("!=", "notin") and value in values:
            return False
    return True


def _gone(handler: Any) -> bool:
    """Whether a watch's client closed its connection (it sends nothing more after its request, until it goes)."""
    try:
        return bool(select.select([handler.connection], [], [], 0)[0])
    except (OSError, ValueError):
        return True


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch (a strategic merge patch is applied the same way: lists are replaced)."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


class Store(kube_jobs.JobController):
    """The objects by (plural, namespace, name); the Job controller (kube_jobs) and its pods; the JobSet controller."""

    def __init__(self, root: Path):
        self.root = root
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.pods: dict[tuple[str, str], kube_pods.Pod] = {}
        self.lock = threading.RLock()
        self.version = 1
        self._seen: dict[str, str] = {}  # uid: the object's content (less its resourceVersion) a watch last saw
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
        requirements = parse_selector(selector)
        with self.lock:
            return [o for (p, n, _), o in self.objects.items() if p == plural and (ns is None or n == ns)
                    and _matches(o["metadata"].get("labels", {}), requirements)]

    def stamped(self, objects: list[dict[str, Any]]) -> list[tuple[str, str]]:
        """(resourceVersion, JSON) of each object, after a new resourceVersion for any whose content changed since a
        watch last saw it: the controllers here write status in place, and the API server gives every write one."""
        found = []
        with self.lock:
            for obj in objects:
                meta = obj["metadata"]
                content = json.dumps({**obj, "metadata": {k: v for k, v in meta.items() if k != "resourceVersion"}},
                                     sort_keys=True)
                if self._seen.setdefault(meta["uid"], content) != content:
                    self.version += 1
                    meta["resourceVersion"] = str(self.version)
                    self._seen[meta["uid"]] = content
                found.append((meta["resourceVersion"], json.dumps(obj)))
        return found

    def stop(self) -> None:
        for runner in list(self.pods.values()):
            runner.stop()
        for runner in list(self.pods.values()):
            runner.done.wait(10)


class _Handler(kube_wire.Handler):
    server: "KubeServer"

    def route(self, method: str) -> None:
        url = urlparse(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        path = url.path.rstrip("/") or "/"
        if self.server.forbid:
            verb = {"GET": "get", "POST": "create", "DELETE": "delete"}.get(method, method.lower())
            raise ApiStatus(403, f'{path} is forbidden: User "emulated" cannot {verb} the resource at this path')
        fixed = self.server.discovery(path)
        if fixed is not None and method == "GET":
            return self.send_json(200, fixed)
        match = _PATH.match(path)
        if match is None:
            raise ApiStatus(404, f"the server could not find the requested resource ({path[:200]})")
        self.server.api(self, method, match, query)

    def body(self, kind: str, patch: bool = False) -> dict[str, Any]:
        return kube_wire.decode(self.raw, self.media, kind, patch)


class KubeServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, port: int = 0, host: str = "127.0.0.1"):
        super().__init__((host, port), _Handler)
        self.forbid = False
        self.closed = threading.Event()  # set by stop(): open watches end
        self.serve_jobsets = True  # False: a cluster without the JobSet controller
        self.serve_tfjobs = True  # False: a cluster without the Training Operator
        self.read_timeout = kube_wire.read_timeout()
        self.token = secrets.token_urlsafe(32)
        reaper.remove_abandoned(ROOT_NAME)  # a killed emulator's folder: its kubeconfig holds a token, CA and key
        self._root = Path(tempfile.mkdtemp(prefix=reaper.owned_prefix(ROOT_NAME)))  # 0700: pods, key, kubeconfig
        try:
            self.tls = kube_wire.Tls(self._root)
        except BaseException:
            self.server_close()
            shutil.rmtree(self._root, ignore_errors=True)
            raise
        self.store = Store(self._root)
        self.url = f"https://{host}:{self.server_address[1]}"
        self.kubeconfig = self._root / "kubeconfig"
        self._write_kubeconfig()

    def _write_kubeconfig(self) -> None:
        name = "mlsubmit-emulator"
        config = {"apiVersion": "v1", "kind": "Config", "current-context": name, "preferences": {},
                  "clusters": [{"name": name, "cluster": {"server": self.url,
                                                          "certificate-authority-data": self.tls.ca_data}}],
                  "users": [{"name": name, "user": {"token": self.token}}],
                  "contexts": [{"name": name, "context": {"cluster": name, "user": name, "namespace": "default"}}]}
        descriptor = os.open(self.kubeconfig, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as out:
            json.dump(config, out, indent=1)  # JSON is YAML: kubectl and the client read it as a kubeconfig

    def start(self) -> "KubeServer":
        threading.Thread(target=self.serve_forever, daemon=True, name="kube-api").start()
        return self

    def stop(self) -> None:
        self.closed.set()
        self.shutdown()
        self.server_close()
        self.store.stop()
        shutil.rmtree(self._root, ignore_errors=True)

    def handle_error(self, request: Any, client_address: Any) -> None:  # a client that went away: not our problem
        pass

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
        if plural not in table or (sub == "log" and plural != "pods"):
            raise ApiStatus(404, f"the server could not find the requested resource ({plural})")
        kind, namespaced = table[plural]
        if ns is not None and not namespaced:
            raise ApiStatus(404, f"the server could not find the requested resource ({plural} is not namespaced)")
        store = self.store
        if namespaced and ns is not None and ("namespaces", "", ns) not in store.objects:
            raise ApiStatus(404, f'namespaces "{ns}" not found', name=ns, kind="namespaces")
        key_ns = ns or ""
        validation = query.get("fieldValidation", "")
        if validation not in ("", "Ignore", "Warn", "Strict"):
            raise ApiStatus(400, f'fieldValidation parameter unsupported: "{validation[:40]}"')
        admit = {"plural": plural, "kind": kind, "group_version": group_version,
                 "namespace": key_ns if namespaced else None, "strict": validation == "Strict",
                 "version": f"{VERSION['major']}.{VERSION['minor']}"}
        if method == "GET" and name is None:
            return self._list(handler, plural, kind, group_version, ns if namespaced else None, query)
        if name is None:
            if method != "POST" or (namespaced and ns is None):
                raise ApiStatus(405, f"the server does not allow this method on the requested resource ({method})")
            return self._create(handler, plural, key_ns, kube_admission.admit(handler.body(kind), **admit), query)
        obj = store.objects.get((plural, key_ns, name))
        if obj is None:
            raise ApiStatus(404, f'{plural} "{name[:253]}" not found', name=name[:253], kind=plural)
        if method == "GET" and sub == "log":
            return self._log(handler, key_ns, name, query)
        if method == "GET":
            return handler.send_json(200, obj)
        if method == "DELETE":
            options = handler.body("DeleteOptions") if handler.raw else {}  # Orphan keeps a Job's pods, as a cluster
            policy = options.get("propagationPolicy") or query.get("propagationPolicy") or "Background"
            return self._delete(handler, plural, key_ns, name, obj, orphan=policy == "Orphan")
        if method in ("PUT", "PATCH") and sub is None:
            return self._update(handler, method, plural, kind, name, obj, admit)
        raise ApiStatus(405, f"the server does not allow this method on the requested resource ({method})")

    def _list(self, handler: _Handler, plural: str, kind: str, group_version: str, ns: str | None,
              query: dict[str, str]) -> None:
        limit = query.get("limit", "0")
        if not limit.isdigit():  # kubectl's --chunk-size; every item is sent in one answer
            raise ApiStatus(400, f'invalid value for limit: "{limit[:40]}": a whole number >= 0')
        field = query.get("fieldSelector", "")

        def current() -> list[dict[str, Any]]:
            items = self.store.items(plural, ns, query.get("labelSelector", ""))
            if field.startswith("metadata.name="):
                items = [i for i in items if i["metadata"]["name"] == field.split("=", 1)[1]]
            return items

        items = current()
        if query.get("watch") in ("true", "1"):
            return self._watch(handler, current, query)
        handler.send_json(200, {"kind": f"{kind}List", "apiVersion": group_version,
                                "metadata": {"resourceVersion": str(self.store.version)}, "items": items})

    def _create(self, handler: _Handler, plural: str, ns: str, obj: dict[str, Any], query: dict[str, str]) -> None:
        store, obj_name = self.store, obj["metadata"]["name"]
        with store.lock:
            if (plural, ns, obj_name) in store.objects:
                raise ApiStatus(409, f'{plural} "{obj_name}" already exists', name=obj_name, kind=plural)
            if query.get("dryRun"):
                return handler.send_json(201, obj)
            if plural == "namespaces":
                obj["status"] = {"phase": "Active"}
            store.add(plural, ns, obj)
            try:
                if plural == "jobs":
                    store.start_job(ns, obj)
                elif plural == "jobsets":
                    store.jobsets.create(ns, obj)
                elif plural == "tfjobs":
                    store.tfjobs.create(ns, obj)
            except Exception:  # a controller that cannot take it: a 500, and the object is not left behind
                store.objects.pop((plural, ns, obj_name), None)
                raise
        handler.send_json(201, obj)

    def _update(self, handler: _Handler, method: str, plural: str, kind: str, name: str, obj: dict[str, Any],
                admit: dict[str, Any]) -> None:
        """PUT replaces the object, PATCH merges into it; either way the result passes admission again, keeps its
        identity (uid, creation time, status), and a controller's object keeps its spec (immutable here)."""
        body = handler.body(kind, patch=method == "PATCH")
        with self.store.lock:
            new = merge_patch(copy.deepcopy(obj), body) if method == "PATCH" else body
            there = (new.get("metadata") or {}).get("name") if isinstance(new.get("metadata"), dict) else None
            if method == "PUT" and there != name:
                raise ApiStatus(400, f"the name of the object ({there}) does not match the name on the URL ({name})")
            if method == "PATCH" and there != name:
                raise kube_admission.invalid(kind, admit["group_version"], name, [
                    ("metadata.name", "FieldValueInvalid", f'Invalid value: "{there}": field is immutable')])
            new = kube_admission.admit(new, **admit)
            if plural in _OWNED and new.get("spec") != obj.get("spec"):
                raise kube_admission.invalid(kind, admit["group_version"], name, [
                    ("spec", "FieldValueInvalid", "Invalid value: the spec of a running object: field is immutable")])
            meta = obj["metadata"]
            new["metadata"].update({k: meta[k] for k in ("uid", "creationTimestamp", "namespace") if k in meta})
            if "status" in obj:
                new["status"] = obj["status"]
            if plural in _OWNED:  # the controllers hold this very dict: change it in place
                meta.update({k: new["metadata"][k] for k in ("labels", "annotations") if k in new["metadata"]})
            else:
                obj.clear()
                obj.update(new)
            self.store.version += 1
            meta = obj["metadata"]
            meta["resourceVersion"] = str(self.store.version)
        handler.send_json(200, obj)

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
        handler.send_json(200, obj)  # as the API server answers a delete: the object as it was

    def _watch(self, handler: _Handler, current: Callable[[], list[dict[str, Any]]], query: dict[str, str]) -> None:
        """A watch as kube-apiserver serves it: one JSON event a line, `{"type": "ADDED"|"MODIFIED"|"DELETED",
        "object": …}`, in a chunked answer. Without resourceVersion (or with "0") an ADDED for every object there
        first; with one (a list's), only what changed after it. It ends after timeoutSeconds (else 30 min), when the
        client goes, or when the server stops; the client then lists or watches again from the last resourceVersion."""
        timeout, since = query.get("timeoutSeconds", ""), query.get("resourceVersion", "") or "0"
        for parameter, value in (("timeoutSeconds", timeout), ("resourceVersion", since)):
            if value and not value.isdigit():
                raise ApiStatus(400, f'invalid value for {parameter}: "{value[:40]}": a whole number >= 0')
        deadline = time.monotonic() + (int(timeout) if timeout else WATCH_SECONDS)
        handler.start_chunked("application/json")
        sent: dict[tuple[str, str], tuple[str, str]] = {}  # (namespace, name): (resourceVersion, JSON) last sent
        first = True
        while True:
            try:
                now = {(o["metadata"].get("namespace", ""), o["metadata"]["name"]): o for o in current()}
                versions = dict(zip(now, self.store.stamped(list(now.values()))))
            except RuntimeError:  # a controller changed an object while it was read: read it again
                continue
            events = [("DELETED", sent.pop(key)[1]) for key in [k for k in sent if k not in now]]
            for key, (version, text) in versions.items():
                if key not in sent and not (first and int(version) <= int(since)):
                    events.append(("ADDED", text))
                elif key in sent and sent[key][0] != version:
                    events.append(("MODIFIED", text))
                sent[key] = (version, text)
            first = False
            data = b"".join(b'{"type": "%s", "object": %s}\n' % (kind.encode(), text.encode()) for kind, text in events)
            try:
                handler.send_chunk(data)
                if self.closed.wait(WATCH_POLL) or time.monotonic() > deadline or _gone(handler):
                    break
            except OSError:  # the client went
                handler.close_connection = True
                return
        handler.end_chunked()

    def _log(self, handler: _Handler, ns: str, name: str, query: dict[str, str]) -> None:
        runner = self.store.pods.get((ns, name))
        if runner is None:
            return handler.send_json(200, b"", "text/plain")
        if query.get("follow") not in ("true", "1"):
            return handler.send_json(200, bytes(runner.log), "text/plain")
        handler.start_chunked("text/plain")
        sent = 0
        while True:
            finished = runner.done.is_set()
            data = bytes(runner.log[sent:])
            handler.send_chunk(data)
            sent += len(data)
            if finished:
                break
            time.sleep(0.1)
        handler.end_chunked()
