"""`mlsubmit jobs list|describe|logs|wait|cancel --api kubernetes[:CONTEXT]`: the jobs `train --target kubernetes`
(or `kubectl apply` of `config --format kubernetes`) made, read from the cluster through their labels, in the
namespace of the kubeconfig context (as kubectl does). Answers like a Target: get, list, cancel, logs."""

from __future__ import annotations

import dataclasses
from typing import Any

from mlsubmit.errors import UsageError
from mlsubmit.kube import manifests
from mlsubmit.targets import kubernetes as kube
from mlsubmit.targets.base import JobStatus, LogEntry, PoolSummary, check_state

API = "kubernetes"


def _namespace(context: str | None) -> str:
    from kubernetes import config

    try:
        contexts, current = config.list_kube_config_contexts()
    except Exception:  # an unusable kubeconfig: kube.Cluster says what is wrong with it, in one line
        return "default"
    chosen = next((c for c in contexts if c["name"] == context), None) if context else current
    return ((chosen or {}).get("context") or {}).get("namespace") or "default"


def _time(value: str | None) -> str | None:
    """An RFC 3339 time as the API server sends it (`2026-12-07T14:00:00Z`, already the form shown), or None."""
    return value or None


class KubeJobs:
    api = API
    noun = "Kubernetes job"

    def __init__(self, api: str):
        context = kube.parse_target(api)
        self.cluster = kube.Cluster(context, _namespace(context))

    def resolve(self, job: str) -> str:
        return manifests.kube_name(job.strip())

    def _jobs(self, selector: str) -> list[dict[str, Any]]:
        return self.cluster.call("list", "jobs", self.cluster.rest.list, "jobs", self.cluster.namespace,
                                 label_selector=selector)["items"]

    def _status(self, name: str, jobs: list[dict[str, Any]], jobsets: list[dict[str, Any]]) -> JobStatus:
        state, reason = kube.job_state(jobs, jobsets)
        status = [j.get("status") or {} for j in jobs]
        if state == "RUNNING" and not any(s.get("active") for s in status):
            state = "PENDING" if not any(s.get("startTime") for s in status) else state
        roles = [(j["metadata"].get("labels") or {}).get(manifests.ROLE_LABEL, "?") for j in jobs]
        pools = tuple(PoolSummary(role, (j.get("spec") or {}).get("completions") or 1, "pod")
                      for role, j in zip(roles, jobs))
        starts = [s["startTime"] for s in status if s.get("startTime")]
        ends = [s["completionTime"] for s in status if s.get("completionTime")]
        created = min((j["metadata"].get("creationTimestamp") or "" for j in jobs), default=None)
        created_at = _time(created)
        labels = dict(jobs[0]["metadata"].get("labels") or {}) if jobs else {}
        details: dict[str, Any] = {"jobs": [j["metadata"]["name"] for j in jobs]}
        if jobsets:  # the JobSet (or TFJob) is the job: its labels, its creation time, its restarts
            meta = jobsets[0]["metadata"]
            labels, created_at = dict(meta.get("labels") or {}), meta.get("creationTimestamp") or created_at
            details.update({jobsets[0]["kind"].lower(): meta["name"]},
                           restarts=(jobsets[0].get("status") or {}).get("restarts", 0))
        return JobStatus(API, name, name, name, state, state, self.cluster.namespace, self.cluster.where,
                         created_at, _time(min(starts)) if starts else None,
                         _time(max(ends)) if ends and state in ("SUCCEEDED", "FAILED") else None,
                         reason if state == "FAILED" else None, None, labels, "CUSTOM",
                         pools, details, {}, {"namespace": self.cluster.namespace})

    def get(self, job: str) -> JobStatus:
        name = self.resolve(job)
        jobs = self._jobs(f"{manifests.JOB_LABEL}={name}")
        jobsets = self.cluster.owners(f"{manifests.JOB_LABEL}={name}")
        if not jobs and not jobsets:
            raise UsageError(f"no Kubernetes job {name!r} in namespace {self.cluster.namespace!r} on "
                             f"{self.cluster.where}", hint="see `mlsubmit jobs list --api kubernetes`")
        return self._status(name, jobs, jobsets)

    def list(self, state: str | None = None, limit: int = 20, *, filter: str | None = None) -> list[JobStatus]:
        wanted = check_state(state) if state else None
        by_name: dict[str, list[dict[str, Any]]] = {}
        for job in self._jobs(manifests.JOB_LABEL):
            by_name.setdefault(job["metadata"]["labels"][manifests.JOB_LABEL], []).append(job)
        jobsets: dict[str, list[dict[str, Any]]] = {}
        for jobset in self.cluster.owners(manifests.JOB_LABEL):
            jobsets.setdefault(jobset["metadata"]["labels"][manifests.JOB_LABEL], []).append(jobset)
            by_name.setdefault(jobset["metadata"]["labels"][manifests.JOB_LABEL], [])
        found = [self._status(name, jobs, jobsets.get(name, [])) for name, jobs in by_name.items()]
        found = [s for s in found if wanted is None or s.state == wanted]
        return sorted(found, key=lambda s: s.create_time or "", reverse=True)[:limit]

    def cancel(self, job: str) -> JobStatus:
        """Delete the job's objects with foreground propagation (its pods go first); the job as it was, CANCELLED."""
        status = self.get(job)
        if status.done:
            raise UsageError(f"the Kubernetes job {status.job_id} already ended ({status.state}); nothing to cancel",
                             hint=f"kubectl delete jobs,services,configmaps -l {manifests.JOB_LABEL}={status.job_id}")
        kube.delete_job(self.cluster, status.job_id)
        return dataclasses.replace(status, state="CANCELLED", api_state="CANCELLED")

    def logs(self, status: JobStatus, *, since: str | None = None, task: str | None = None) -> list[LogEntry]:
        pods = self.cluster.call("list", "pods", self.cluster.rest.list, "pods", self.cluster.namespace,
                                 label_selector=f"{manifests.JOB_LABEL}={status.job_id}")["items"]
        found = []
        for pod in pods:
            labels = pod["metadata"].get("labels") or {}
            replica = f"{labels.get(manifests.ROLE_LABEL)}-{kube.replica_index(labels)}"
            if task is not None and task != replica:
                continue
            text = self.cluster.call("get", "pods/log", self.cluster.rest.log, pod["metadata"]["name"],
                                     self.cluster.namespace)
            stamp = _time(pod["metadata"].get("creationTimestamp")) or ""
            for i, line in enumerate(text.splitlines()):
                found.append(LogEntry(f"{replica}-{i:09d}", stamp, replica, "DEFAULT", line))
        return found

    def task_name(self, task: str) -> str:
        return task

    def console_url(self, status: JobStatus) -> None:
        return None
