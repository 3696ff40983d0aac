"""The emulated cluster's batch/v1 Job controller, as the Job documentation describes it (for Indexed Jobs).

A Job gets one pod per completion index (`<job>-<i>-<suffix>`, hostname `<job>-<i>`), run by mlsubmit.emulator.
kube_pods. A pod that fails is judged by the Job's `podFailurePolicy` first (rules in order, the first whose
`onExitCodes` (operator In/NotIn, optional containerName) or `onPodConditions` match decides):
FailJob fails the Job at once (reason PodFailurePolicy) and kills its other pods; Ignore replaces the pod without
counting it; Count (or no rule) counts it against `backoffLimit` (default 6): past it the Job fails
(BackoffLimitExceeded), below it the index gets a new pod. `activeDeadlineSeconds` after the Job started, a Job
not yet finished fails with reason DeadlineExceeded and its running pods are killed. Every index succeeded: Complete.
"""

from __future__ import annotations

import json
import secrets
import shutil
import threading
import time
from datetime import datetime, timezone
from typing import Any

from mlsubmit.emulator import kube_pods


def now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def failure_rule(job_spec: dict[str, Any], container: str, code: int,
                 conditions: tuple[str, ...] = ()) -> tuple[str, int | None]:
    """(action, rule index) of the podFailurePolicy rule a pod that exited with `code` matches; ("Count", None)
    when none does (pure)."""
    for number, rule in enumerate((job_spec.get("podFailurePolicy") or {}).get("rules", [])):
        codes = rule.get("onExitCodes")
        if codes is not None:
            if codes.get("containerName") not in (None, container):
                continue
            inside = code in codes.get("values", [])
            if inside == (codes.get("operator", "In") == "In"):
                return rule["action"], number
        elif any(c.get("type") in conditions and c.get("status", "True") == "True"
                 for c in rule.get("onPodConditions", [])):
            return rule["action"], number
    return "Count", None


class JobController:
    """Mixed into kube_api.Store (which has objects, pods, lock, root, add(), jobsets)."""

    objects: dict[tuple[str, str, str], dict[str, Any]]
    pods: dict[tuple[str, str], kube_pods.Pod]
    lock: Any

    def start_job(self, ns: str, job: dict[str, Any]) -> None:
        job["status"] = {"active": 0, "startTime": now()}
        for index in range(int(job["spec"].get("completions", 1))):
            self._start_pod(ns, job, index)
        deadline = job["spec"].get("activeDeadlineSeconds")
        if deadline:
            timer = threading.Timer(float(deadline), self._deadline, args=(ns, job))
            timer.daemon = True
            timer.start()

    def _start_pod(self, ns: str, job: dict[str, Any], index: int) -> None:
        name, uid = job["metadata"]["name"], job["metadata"]["uid"]
        template = json.loads(json.dumps(job["spec"]["template"]))
        meta = template.setdefault("metadata", {})
        labels = {**meta.get("labels", {}), "batch.kubernetes.io/job-name": name, "job-name": name,
                  "batch.kubernetes.io/controller-uid": uid, "controller-uid": uid,
                  "batch.kubernetes.io/job-completion-index": str(index)}
        pod_name = f"{name}-{index}-{secrets.token_hex(3)[:5]}"
        pod_spec = template["spec"]
        pod_spec.setdefault("hostname", f"{name}-{index}")
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": pod_name, "labels": labels, "annotations": {"batch.kubernetes.io/job-completion-index":
                                                                str(index)},
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": uid,
                                 "controller": True, "blockOwnerDeletion": True}]},
            "spec": {**pod_spec, "nodeName": "emulator"}, "status": {"phase": "Running", "startTime": now(),
                                                                     "podIP": "127.0.0.1"}}
        self.add("pods", ns, pod)
        runner = kube_pods.Pod(pod, kube_pods.new_workdir(self.root, pod_name))
        self.pods[(ns, pod_name)] = runner
        job["status"]["active"] += 1
        kube_pods.start_pod(runner, lambda cm: self._config_map(ns, cm), {"JOB_COMPLETION_INDEX": str(index)},
                            lambda p, code: self._pod_exited(ns, job, p, code, index))

    def _config_map(self, ns: str, name: str) -> dict[str, str] | None:
        found = self.objects.get(("configmaps", ns, name))
        return None if found is None else dict(found.get("data", {}))

    def _pod_exited(self, ns: str, job: dict[str, Any], pod: kube_pods.Pod, code: int, index: int) -> None:
        with self.lock:
            phase = "Succeeded" if code == 0 else "Failed"
            container = pod.obj["spec"]["containers"][0]["name"]
            pod.obj["status"].update(phase=phase, containerStatuses=[{
                "name": container, "ready": False, "restartCount": 0, "image": "", "imageID": "",
                "state": {"terminated": {"exitCode": code, "reason": "Completed" if code == 0 else "Error",
                                         "finishedAt": now()}}}])
            status = job["status"]
            status["active"] = max(0, status["active"] - 1)
            finished = any(c["status"] == "True" for c in status.get("conditions", []))
            if code == 0:
                status["succeeded"] = status.get("succeeded", 0) + 1
                if not finished and status["succeeded"] >= int(job["spec"].get("completions", 1)):
                    self._finish(ns, job, "Complete", "CompletionsReached",
                                 "Reached expected number of succeeded pods")
            elif not pod.stopped and not finished:
                self._failed(ns, job, pod, container, code, index)
            pod.done.set()

    def _failed(self, ns: str, job: dict[str, Any], pod: kube_pods.Pod, container: str, code: int,
                index: int) -> None:
        name = pod.obj["metadata"]["name"]
        action, rule = failure_rule(job["spec"], container, code)
        if action == "FailJob":
            job["status"]["failed"] = job["status"].get("failed", 0) + 1
            return self._finish(ns, job, "Failed", "PodFailurePolicy", f"Container {container} for pod {ns}/{name} "
                                f"failed with exit code {code} matching FailJob rule at index {rule}")
        if action != "Ignore":
            job["status"]["failed"] = job["status"].get("failed", 0) + 1
            if job["status"]["failed"] > int(job["spec"].get("backoffLimit", 6)):
                return self._finish(ns, job, "Failed", "BackoffLimitExceeded",
                                    f"Job has reached the specified backoff limit (pod {name} exited with code "
                                    f"{code})")
        if ("jobs", ns, job["metadata"]["name"]) in self.objects:  # a new pod for the index, as the controller makes
            self._start_pod(ns, job, index)

    def _deadline(self, ns: str, job: dict[str, Any]) -> None:
        with self.lock:
            if any(c["status"] == "True" for c in job["status"].get("conditions", [])) \
                    or ("jobs", ns, job["metadata"]["name"]) not in self.objects:
                return
            self._finish(ns, job, "Failed", "DeadlineExceeded", "Job was active longer than specified deadline")

    def _finish(self, ns: str, job: dict[str, Any], kind: str, reason: str, message: str) -> None:
        conditions = [{"type": "FailureTarget" if kind == "Failed" else "SuccessCriteriaMet", "status": "True",
                       "reason": reason, "message": message, "lastProbeTime": now(), "lastTransitionTime": now()},
                      {"type": kind, "status": "True", "reason": reason, "message": message,
                       "lastProbeTime": now(), "lastTransitionTime": now()}]
        job["status"]["conditions"] = conditions
        if kind == "Complete":
            job["status"]["completionTime"] = now()
        else:
            self.stop_pods(ns, job["metadata"]["uid"])
        self.jobsets.job_finished(ns, job)

    def stop_pods(self, ns: str, uid: str, remove: bool = False, wait: float = 0.0) -> None:
        with self.lock:
            runners = [r for (n, _), r in self.pods.items() if n == ns
                       and r.obj["metadata"]["labels"].get("controller-uid") == uid]
        for runner in runners:
            runner.stop()
        deadline = time.monotonic() + wait
        for runner in runners:
            runner.done.wait(max(0.0, deadline - time.monotonic()))
            if remove:
                with self.lock:
                    self.objects.pop(("pods", ns, runner.obj["metadata"]["name"]), None)
                    self.pods.pop((ns, runner.obj["metadata"]["name"]), None)
                shutil.rmtree(runner.workdir, ignore_errors=True)
