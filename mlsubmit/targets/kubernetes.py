"""`--target kubernetes[:CONTEXT]`: the job's objects (mlsubmit.kube.manifests) created once with the official
`kubernetes` client and the user's kubeconfig, followed to the end, cancelled by deleting them.

1. bad input stops here, nothing created: no kubeconfig, one that is not YAML or not a kubeconfig, an unknown
   context, the API server does not answer within 10 s (one try) or refuses the credentials (401), a namespace
   that is not an RFC 1123 label or does not exist, RBAC refuses (the verb and resource named), a GPU GKE has no
   label for, an object the schemas refuse (mlsubmit.kube.validate) or the API server refuses (its Status message);
2. the objects carry the job's request id (a hash of the spec, the name and the packages): a re-run of the same
   submission finds them by that label and follows them; an object of the same name from another submission
   (AlreadyExists with another request id) is refused, never overwritten;
3. every replica pod's log is streamed with its `[role-index]` prefix; the state comes from the Jobs' conditions:
   the chief's Job Complete is success (the other replicas then end on their own: the launcher watches the chief;
   those still running after a grace period are deleted), any Job Failed is failure; a JobSet's state is its own
   Completed/Failed condition (its controller restarts the child Jobs up to failurePolicy.maxRestarts times, and
   removes the replicas still running once the chief succeeded);
4. cancel (Ctrl-C, SIGTERM, `mlsubmit jobs cancel`) deletes the job's objects with foreground propagation.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mlsubmit.errors import UsageError
from mlsubmit.kube import manifests, rest

CONNECT_SECONDS = 10
GRACE_SECONDS = 30
JOBSET = ("jobset.x-k8s.io", "v1alpha2", "jobsets")
TFJOB = ("kubeflow.org", "v1", "tfjobs")
CUSTOM = {"JobSet": JOBSET, "TFJob": TFJOB}  # the kinds an operator runs: created, read and deleted as custom objects


@dataclass(frozen=True)
class KubeOutcome:
    job: str
    state: str  # SUCCEEDED, FAILED, CANCELLED
    seconds: float
    reason: str = ""


def parse_target(text: str) -> str | None:
    """The kubeconfig context of `kubernetes[:CONTEXT]` (None: the current one)."""
    _, _, context = str(text).partition(":")
    return context or None


def load_kubeconfig(context: str | None) -> Any:
    """The client Configuration of a kubeconfig context (KUBECONFIG, else ~/.kube/config); a file that is missing,
    not YAML or not a kubeconfig is one UsageError line naming it, never the parser's traceback."""
    import yaml
    from kubernetes import client, config

    where = os.environ.get("KUBECONFIG") or "~/.kube/config"
    hint = "set KUBECONFIG to a valid file, or run `gcloud container clusters get-credentials CLUSTER`"
    configuration = client.Configuration()
    try:
        config.load_kube_config(context=context, client_configuration=configuration)
    except config.ConfigException as err:
        raise UsageError(f"cannot use the kubeconfig for --target kubernetes{':' + context if context else ''}: "
                         f"{str(err).splitlines()[0] if str(err) else 'invalid'}",
                         hint=hint + "; `kubectl config get-contexts` lists contexts") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise UsageError(f"cannot read the kubeconfig {where}: it is not valid YAML ({problem}{at})",
                         hint=hint) from None
    except OSError as err:
        raise UsageError(f"cannot read the kubeconfig {where}: {err.strerror or err}", hint=hint) from None
    except (UnicodeDecodeError, TypeError, AttributeError, KeyError, IndexError, ValueError) as err:
        # the client indexes the parsed YAML as it expects: anything else in the file surfaces as one of these
        raise UsageError(f"cannot read the kubeconfig {where}: it is not a kubeconfig (clusters, contexts and users "
                         f"as lists of named entries): {type(err).__name__}: {str(err)[:120]}", hint=hint) from None
    return configuration


def refusal_text(err: Any) -> str:
    """`<code> <reason>: <message>` of an ApiException, the message from the Status body the server sent."""
    try:
        message = json.loads(err.body or "{}").get("message") or ""
    except (ValueError, AttributeError):
        message = ""
    return f"{err.status} {err.reason}" + (f": {message[:300]}" if message else "")


class Cluster:
    """The API clients for one kubeconfig context and namespace: core and batch objects as dicts (mlsubmit.kube.rest),
    custom objects through the client's CustomObjectsApi."""

    def __init__(self, context: str | None, namespace: str):
        try:
            from kubernetes import client
        except ImportError:
            raise UsageError("--target kubernetes needs the kubernetes package, which is not installed",
                             hint="pip install 'mlsubmit[kubernetes]'") from None
        manifests.check_namespace(namespace)
        configuration = load_kubeconfig(context)
        configuration.retries = 0  # before the pool is made: a silent server costs one try of 10 s, not four
        api = client.ApiClient(configuration)
        self.where = f"kubernetes:{context or 'current context'} ({configuration.host})"
        self.namespace = namespace
        self.rest = rest.Rest(api)
        self.custom, self.apis = client.CustomObjectsApi(api), client.ApisApi(api)

    def call(self, verb: str, resource: str, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """function(*args) with the API's refusals as one line: 403 names the verb and resource."""
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError, NewConnectionError
        from urllib3.exceptions import TimeoutError as TimeoutStateError

        try:
            return function(*args, _request_timeout=CONNECT_SECONDS, **kwargs)
        except ApiException as err:
            if err.status == 401:
                raise UsageError(f"the Kubernetes API server of {self.where} refuses your credentials (401 "
                                 "Unauthorized)", hint="renew them (`gcloud container clusters get-credentials "
                                 "CLUSTER`), or point KUBECONFIG at the file that holds them") from None
            if err.status == 403:
                raise UsageError(f"the cluster refuses to let you {verb} {resource} in namespace {self.namespace!r} "
                                 "(RBAC: 403 Forbidden)", hint="ask for a Role that grants it, or use another "
                                 "--namespace") from None
            raise
        except HTTPError as err:
            cause = getattr(err, "reason", None) or err
            timed_out = isinstance(cause, (TimeoutError, TimeoutStateError)) and \
                not isinstance(cause, NewConnectionError)  # urllib3 makes a refused connection a timeout too
            why = f"no answer within {CONNECT_SECONDS} s" if timed_out else \
                f"{type(cause).__name__}: {str(cause).rpartition('>: ')[2][:160]}"
            raise UsageError(f"cannot reach the Kubernetes API server of {self.where}: {why}",
                             hint="check the cluster is up and your kubeconfig's server address") from None

    def check_namespace(self) -> None:
        from kubernetes.client.exceptions import ApiException

        try:
            self.call("get", "namespaces", self.rest.get, "namespaces", self.namespace)
        except ApiException as err:
            if err.status == 404:
                raise UsageError(f"namespace {self.namespace!r} does not exist on {self.where}",
                                 hint=f"kubectl create namespace {self.namespace}, or pass another "
                                      "--namespace") from None
            raise UsageError(f"the API server answered {refusal_text(err)} for namespace {self.namespace!r}") \
                from None


    def check_serves(self, k8s_api: str) -> None:
        """UsageError unless the cluster serves the API group the objects need (JobSet: its controller's CRD)."""
        needed = {"jobset": (*JOBSET[:2], "JobSets (the JobSet controller is not installed there)",
                             "install it (https://jobset.sigs.k8s.io/docs/installation/)"),
                  "tfjob": (*TFJOB[:2], "TFJobs (the Kubeflow Training Operator is not installed there)",
                            "install the Training Operator v1 (https://www.kubeflow.org/docs/components/trainer/"
                            "legacy-v1/installation/)")}.get(k8s_api)
        if needed is None:
            return
        group, version, what, how = needed
        groups = self.call("list", "API groups", self.apis.get_api_versions).groups or []
        if not any(g.name == group and any(v.version == version for v in g.versions) for g in groups):
            raise UsageError(f"{self.where} does not serve {group}/{version} {what}",
                             hint=f"{how}, or use --k8s-api job (plain Indexed Jobs, no operator)")

    def owners(self, selector: str) -> list[dict[str, Any]]:
        """The JobSets and TFJobs with these labels (none of a kind the cluster does not serve)."""
        from kubernetes.client.exceptions import ApiException

        found = []
        for kind, (group, version, plural) in CUSTOM.items():
            try:
                items = self.call("list", plural, self.custom.list_namespaced_custom_object, group, version,
                                  self.namespace, plural, label_selector=selector)["items"]
            except ApiException as err:
                if err.status == 404:
                    continue
                raise
            found += [{**item, "kind": kind} for item in items]
        return found


_PLURAL = {"ConfigMap": "configmaps", "Service": "services", "Job": "jobs"}


def create_once(cluster: Cluster, objects: list[dict[str, Any]]) -> bool:
    """Create the objects unless this submission's are there already (True when they were found, not made)."""
    from kubernetes.client.exceptions import ApiException

    request = objects[0]["metadata"]["labels"][manifests.REQUEST_LABEL]
    selector = f"{manifests.REQUEST_LABEL}={request}"
    if cluster.call("list", "jobs", cluster.rest.list, "jobs", cluster.namespace, label_selector=selector)["items"]:
        return True
    if any(o["kind"] in CUSTOM for o in objects) and cluster.owners(selector):
        return True
    for obj in objects:
        try:
            _create(cluster, obj)
        except ApiException as err:
            if err.status != 409:
                raise UsageError(f"the API server refused {obj['kind']} {obj['metadata']['name']!r}: "
                                 f"{refusal_text(err)}") from None
            if _labels_there(cluster, obj).get(manifests.REQUEST_LABEL) != request:
                raise UsageError(f"a {obj['kind']} named {obj['metadata']['name']!r} from another submission "
                                 f"exists in namespace {cluster.namespace!r}",
                                 hint="pick another --job-name, or delete the old job") from None
    return False


def _create(cluster: Cluster, obj: dict[str, Any]) -> None:
    if obj["kind"] in CUSTOM:
        group, version, plural = CUSTOM[obj["kind"]]
        cluster.call("create", plural, cluster.custom.create_namespaced_custom_object, group, version,
                     cluster.namespace, plural, obj)
        return
    plural = _PLURAL[obj["kind"]]
    cluster.call("create", plural, cluster.rest.create, plural, cluster.namespace, obj)


def _labels_there(cluster: Cluster, obj: dict[str, Any]) -> dict[str, str]:
    name = obj["metadata"]["name"]
    if obj["kind"] in CUSTOM:
        group, version, plural = CUSTOM[obj["kind"]]
        there = cluster.call("get", plural, cluster.custom.get_namespaced_custom_object, group, version,
                             cluster.namespace, plural, name)
        return there["metadata"].get("labels") or {}
    plural = _PLURAL[obj["kind"]]
    there = cluster.call("get", plural, cluster.rest.get, plural, name, cluster.namespace)
    return there["metadata"].get("labels") or {}


def delete_job(cluster: Cluster, name: str) -> int:
    """Delete every object of job `name` (foreground: pods first); the number of objects deleted."""
    selector = f"{manifests.JOB_LABEL}={name}"
    count = 0
    for owner in cluster.owners(selector):  # first: its operator's Jobs and pods go with it
        group, version, plural = CUSTOM[owner["kind"]]
        cluster.call("delete", plural, cluster.custom.delete_namespaced_custom_object, group, version,
                     cluster.namespace, plural, owner["metadata"]["name"], propagation_policy="Foreground")
        count += 1
    for kind in ("jobs", "services", "configmaps"):
        for item in cluster.call("list", kind, cluster.rest.list, kind, cluster.namespace,
                                 label_selector=selector)["items"]:
            cluster.call("delete", kind, cluster.rest.delete, kind, item["metadata"]["name"], cluster.namespace,
                         propagation="Foreground" if kind == "jobs" else None)
            count += 1
    return count


def conditions(obj: dict[str, Any]) -> list[dict[str, Any]]:
    return (obj.get("status") or {}).get("conditions") or []


def job_state(jobs: list[dict[str, Any]], owners: list[dict[str, Any]] | None = None) -> tuple[str, str]:
    """(state, reason) of a job: from its JobSet's or TFJob's conditions when it has one (Completed or Succeeded,
    Failed), else from its Jobs' conditions: RUNNING, SUCCEEDED (the chief's Job Complete), FAILED."""
    if owners:
        owner = owners[0]
        for condition in conditions(owner):
            if condition.get("status") == "True" and condition.get("type") in ("Completed", "Succeeded", "Failed"):
                state = "FAILED" if condition["type"] == "Failed" else "SUCCEEDED"
                why = condition.get("message") or condition["type"]
                return state, f"{owner['kind']} {owner['metadata']['name']}: {why}"
        return "RUNNING", ""
    for job in jobs:
        for condition in conditions(job):
            if condition.get("type") == "Failed" and condition.get("status") == "True":
                return "FAILED", f"{job['metadata']['name']}: {condition.get('message') or condition.get('reason')}"
    chief = [j for j in jobs if (j["metadata"].get("labels") or {}).get(manifests.ROLE_LABEL) == "chief"]
    if chief and any(c.get("type") == "Complete" and c.get("status") == "True" for c in conditions(chief[0])):
        return "SUCCEEDED", "the chief finished"
    if not jobs:
        return "CANCELLED", "the job's objects were deleted"
    return "RUNNING", ""


def replica_index(labels: dict[str, str]) -> str:
    """A pod's replica index: its Indexed Job's completion index, or the Training Operator's replica index."""
    return labels.get("batch.kubernetes.io/job-completion-index") or labels.get("training.kubeflow.org/replica-index") \
        or "0"


class _Logs:
    """One thread per pod streaming its log, each line prefixed with the replica's `[role-index]`."""

    def __init__(self, cluster: Cluster, say: Callable[[str], None]):
        self.cluster, self.say = cluster, say
        self.threads: dict[str, threading.Thread] = {}

    def follow(self, pods: list[dict[str, Any]]) -> None:
        for pod in pods:
            name = pod["metadata"]["name"]
            if name in self.threads:
                continue
            labels = pod["metadata"].get("labels") or {}
            index = replica_index(labels)
            replica = f"{labels.get(manifests.ROLE_LABEL, '?')}-{index}"
            thread = threading.Thread(target=self._stream, args=(name, replica), daemon=True)
            self.threads[name] = thread
            thread.start()

    def _stream(self, pod: str, replica: str) -> None:
        from kubernetes.client.exceptions import ApiException

        prefix = f"[{replica}]"
        for _ in range(120):
            try:
                response = self.cluster.rest.log(pod, self.cluster.namespace, follow=True)
                break
            except ApiException as err:
                if err.status != 400:  # 400: the container is still waiting to start
                    return
                time.sleep(1)
        else:
            return
        pending = b""
        for chunk in response.stream(4096):
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                self.say(f"{prefix} {line.decode(errors='replace')}")
        if pending:
            self.say(f"{prefix} {pending.decode(errors='replace')}")

    def join(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        for thread in self.threads.values():
            thread.join(max(0.0, deadline - time.monotonic()))


def follow(cluster: Cluster, name: str, say: Callable[[str], None], cancelled: threading.Event,
           k8s_api: str = "job") -> KubeOutcome:
    """Stream the job's logs until its state is final (see the module docstring)."""
    started = time.monotonic()
    logs = _Logs(cluster, say)
    selector = f"{manifests.JOB_LABEL}={name}"
    state, reason = "RUNNING", ""
    while state == "RUNNING":
        if cancelled.is_set():
            delete_job(cluster, name)
            return KubeOutcome(name, "CANCELLED", time.monotonic() - started, "cancelled")
        logs.follow(cluster.rest.list("pods", cluster.namespace, label_selector=selector)["items"])
        owners = cluster.owners(selector) if k8s_api != "job" else None
        state, reason = job_state(cluster.rest.list("jobs", cluster.namespace, label_selector=selector)["items"],
                                  owners)
        if owners == [] and state == "RUNNING":
            state, reason = "CANCELLED", "the job's objects were deleted"
        if state == "RUNNING":
            cancelled.wait(0.5)
    if state == "SUCCEEDED":
        deadline = time.monotonic() + GRACE_SECONDS
        while time.monotonic() < deadline:
            jobs = cluster.rest.list("jobs", cluster.namespace, label_selector=selector)["items"]
            if all(any(c.get("status") == "True" and c.get("type") in ("Complete", "Failed") for c in conditions(j))
                   for j in jobs):
                break
            time.sleep(0.5)
        else:
            say(f"replicas still running {GRACE_SECONDS} s after the chief ended are deleted")
            delete_job(cluster, name)
    elif state == "FAILED":
        delete_job(cluster, name)
    logs.join(10)
    return KubeOutcome(name, state, time.monotonic() - started, reason)
