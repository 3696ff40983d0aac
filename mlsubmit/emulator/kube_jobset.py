"""The emulated cluster's JobSet controller (jobset.x-k8s.io/v1alpha2), as kubernetes-sigs/jobset documents it.

A JobSet `<js>` gets one headless Service named after its subdomain (`spec.network.subdomain`, default `<js>`) and,
per replicatedJob `<r>`, `replicas` child Indexed Jobs `<js>-<r>-<jobIndex>` (the Job controller of
mlsubmit.emulator.kube_api then runs their pods, hostname `<js>-<r>-<jobIndex>-<podIndex>` under the subdomain).
Jobs and pods carry the `jobset.sigs.k8s.io/*` labels. When a child Job ends:

- successPolicy (`All`/`Any` of `targetReplicatedJobs`, default every replicatedJob) met: the JobSet is Completed
  and its still-active child Jobs are deleted with their pods;
- a child Job Failed: while `status.restarts < failurePolicy.maxRestarts` every child Job is deleted and made
  again (`restarts` + 1, label `jobset.sigs.k8s.io/restart-attempt`); past that the JobSet is Failed
  (reason ReachedMaxRestarts, or FailedJobs when maxRestarts is 0) and its active child Jobs are deleted.

Deleting the JobSet (any propagation but Orphan) deletes its Jobs, their pods and its Service.
"""

from __future__ import annotations

import json
import threading
from typing import Any

GROUP_VERSION = "jobset.x-k8s.io/v1alpha2"
RESOURCES = {"jobsets": ("JobSet", True)}
PREFIX = "jobset.sigs.k8s.io/"
NAME, RJOB, REPLICAS, INDEX, ATTEMPT = (PREFIX + k for k in ("jobset-name", "replicatedjob-name",
                                                              "replicatedjob-replicas", "job-index",
                                                              "restart-attempt"))


def _owner(jobset: dict[str, Any]) -> list[dict[str, Any]]:
    meta = jobset["metadata"]
    return [{"apiVersion": GROUP_VERSION, "kind": "JobSet", "name": meta["name"], "uid": meta["uid"],
             "controller": True, "blockOwnerDeletion": True}]


def subdomain(jobset: dict[str, Any]) -> str:
    return (jobset["spec"].get("network") or {}).get("subdomain") or jobset["metadata"]["name"]


def child_jobs(jobset: dict[str, Any]) -> list[dict[str, Any]]:
    """The batch/v1 Jobs the controller makes for the JobSet's current restart attempt (pure)."""
    name, attempt = jobset["metadata"]["name"], (jobset.get("status") or {}).get("restarts", 0)
    network = jobset["spec"].get("network") or {}
    jobs = []
    for replicated in jobset["spec"]["replicatedJobs"]:
        replicas = int(replicated.get("replicas", 1))
        for index in range(replicas):
            template = json.loads(json.dumps(replicated["template"]))
            ours = {NAME: name, RJOB: replicated["name"], REPLICAS: str(replicas), INDEX: str(index),
                    ATTEMPT: str(attempt)}
            meta = template.get("metadata") or {}
            spec = template["spec"]
            spec.setdefault("completionMode", "Indexed")
            pod = spec["template"]
            pod.setdefault("metadata", {})["labels"] = {**(pod["metadata"].get("labels") or {}), **ours}
            if network.get("enableDNSHostnames", True):
                pod["spec"]["subdomain"] = subdomain(jobset)
            jobs.append({"apiVersion": "batch/v1", "kind": "Job", "metadata": {
                "name": f"{name}-{replicated['name']}-{index}", "labels": {**(meta.get("labels") or {}), **ours},
                "annotations": {**(meta.get("annotations") or {}), **ours}, "ownerReferences": _owner(jobset)},
                "spec": spec})
    return jobs


def service(jobset: dict[str, Any]) -> dict[str, Any]:
    name = jobset["metadata"]["name"]
    publish = (jobset["spec"].get("network") or {}).get("publishNotReadyAddresses", True)
    return {"apiVersion": "v1", "kind": "Service", "metadata": {
        "name": subdomain(jobset), "labels": {NAME: name}, "ownerReferences": _owner(jobset)},
        "spec": {"clusterIP": "None", "selector": {NAME: name}, "publishNotReadyAddresses": publish}}


def _finished(job: dict[str, Any]) -> str | None:
    for condition in (job.get("status") or {}).get("conditions", []):
        if condition["status"] == "True" and condition["type"] in ("Complete", "Failed"):
            return condition["type"]
    return None


def decide(jobset: dict[str, Any], jobs: list[dict[str, Any]]) -> tuple[str, str, str] | None:
    """(action, reason, message) for the JobSet's child Jobs as they are: Completed, Restart, Failed, or None."""
    failed = [j["metadata"]["name"] for j in jobs if _finished(j) == "Failed"]
    if failed:
        restarts = (jobset.get("status") or {}).get("restarts", 0)
        allowed = int((jobset["spec"].get("failurePolicy") or {}).get("maxRestarts", 0))
        if restarts < allowed:
            return "Restart", "", f"job {failed[0]} failed: restart {restarts + 1} of {allowed}"
        return ("Failed", "ReachedMaxRestarts" if allowed else "FailedJobs",
                f"jobset failed due to reaching max number of restarts ({failed[0]} failed)" if allowed
                else f"job {failed[0]} failed")
    policy = jobset["spec"].get("successPolicy") or {}
    targets = policy.get("targetReplicatedJobs") or [r["name"] for r in jobset["spec"]["replicatedJobs"]]
    chosen = [j for j in jobs if j["metadata"]["labels"].get(RJOB) in targets]
    done = [_finished(j) == "Complete" for j in chosen]
    if chosen and (any(done) if policy.get("operator") == "Any" else all(done)):
        return "Completed", "AllJobsCompleted", "jobset completed successfully"
    return None


class Controller:
    """Reconciles the JobSets of a kube_api.Store; one reconcile at a time, never under the store's lock while it
    waits for pods to stop (their exit handlers need that lock)."""

    def __init__(self, store: Any):
        self.store = store
        self.lock = threading.Lock()
        self.deleted: set[str] = set()

    def create(self, ns: str, jobset: dict[str, Any]) -> None:
        jobset["status"] = {"restarts": 0, "restartsCountTowardsMax": 0, "replicatedJobsStatus": []}
        svc = service(jobset)
        if ("services", ns, svc["metadata"]["name"]) not in self.store.objects:
            self.store.add("services", ns, svc)
        self._make_jobs(ns, jobset)

    def _make_jobs(self, ns: str, jobset: dict[str, Any]) -> None:
        for job in child_jobs(jobset):
            self.store.add("jobs", ns, job)
            self.store.start_job(ns, job)
        self._status(ns, jobset)

    def _children(self, ns: str, jobset: dict[str, Any]) -> list[dict[str, Any]]:
        uid = jobset["metadata"]["uid"]
        return [o for (p, n, _), o in list(self.store.objects.items()) if p == "jobs" and n == ns
                and any(r.get("uid") == uid for r in o["metadata"].get("ownerReferences", []))]

    def _status(self, ns: str, jobset: dict[str, Any]) -> None:
        jobs = self._children(ns, jobset)
        rows = []
        for replicated in jobset["spec"]["replicatedJobs"]:
            mine = [j for j in jobs if j["metadata"]["labels"].get(RJOB) == replicated["name"]]
            ends = [_finished(j) for j in mine]
            rows.append({"name": replicated["name"], "ready": 0, "succeeded": ends.count("Complete"),
                         "failed": ends.count("Failed"), "active": ends.count(None), "suspended": 0})
        jobset["status"]["replicatedJobsStatus"] = rows

    def job_finished(self, ns: str, job: dict[str, Any]) -> None:
        """Called by the Job controller when a Job gets Complete or Failed: reconcile its JobSet in a thread."""
        owner = next((r for r in job["metadata"].get("ownerReferences", []) if r.get("kind") == "JobSet"), None)
        if owner is not None:
            threading.Thread(target=self.reconcile, args=(ns, owner["name"], owner["uid"]), daemon=True,
                             name=f"jobset-{owner['name']}").start()

    def reconcile(self, ns: str, name: str, uid: str) -> None:
        with self.lock:
            with self.store.lock:
                jobset = self.store.objects.get(("jobsets", ns, name))
                if jobset is None or uid != jobset["metadata"]["uid"] or uid in self.deleted \
                        or jobset["status"].get("terminalState"):
                    return
                jobs = self._children(ns, jobset)
                action = decide(jobset, jobs)
            if action is None:
                with self.store.lock:
                    self._status(ns, jobset)
                return
            kind, reason, message = action
            if kind == "Restart":
                self._delete_jobs(ns, jobs)
                with self.store.lock:
                    jobset["status"]["restarts"] += 1
                    jobset["status"]["restartsCountTowardsMax"] += 1
                    self._make_jobs(ns, jobset)
                return
            self._delete_jobs(ns, [j for j in jobs if _finished(j) is None])
            with self.store.lock:
                from mlsubmit.emulator.kube_jobs import now

                jobset["status"].update(terminalState=kind, conditions=[
                    {"type": kind, "status": "True", "reason": reason, "message": message,
                     "lastTransitionTime": now()}])
                self._status(ns, jobset)
                self.store.version += 1
                jobset["metadata"]["resourceVersion"] = str(self.store.version)

    def _delete_jobs(self, ns: str, jobs: list[dict[str, Any]]) -> None:
        for job in jobs:
            self.store.stop_pods(ns, job["metadata"]["uid"], remove=True, wait=20)
            with self.store.lock:
                self.store.objects.pop(("jobs", ns, job["metadata"]["name"]), None)

    def delete(self, ns: str, jobset: dict[str, Any]) -> None:
        """The JobSet's Jobs, their pods and its Service go (as the garbage collector does on a cluster)."""
        with self.lock:
            with self.store.lock:
                jobs = self._children(ns, jobset)
                self.deleted.add(jobset["metadata"]["uid"])
            self._delete_jobs(ns, jobs)
            with self.store.lock:
                key = ("services", ns, subdomain(jobset))
                there = self.store.objects.get(key)
                if there is not None and any(r.get("uid") == jobset["metadata"]["uid"]
                                             for r in there["metadata"].get("ownerReferences", [])):
                    self.store.objects.pop(key)
