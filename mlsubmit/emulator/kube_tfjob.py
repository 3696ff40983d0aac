"""The emulated cluster's Training Operator for `kubeflow.org/v1` TFJobs (restartPolicy Never), as its v1
documentation and source describe it.

A TFJob `<tj>` gets, per tfReplicaSpec type `<T>` and index `i`, one pod `<tj>-<t>-<i>` (t = the type lowercased)
and one headless Service of the same name; each pod's container gets TF_CONFIG from the operator: the cluster of
chief/worker/ps addresses `<tj>-<t>-<i>.<namespace>.svc:<port>` (evaluators are not in it) and its own task. (The
emulator's one difference, as for Jobs: no DNS, so the addresses in TF_CONFIG are 127.0.0.1 with the port
mlsubmit.emulator.kube_pods gives that host.) The job Succeeded when the chief (without one: worker 0) exits 0,
Failed when any replica exits non-zero (backoffLimit 0) or at `runPolicy.activeDeadlineSeconds`; then the pods
still running are deleted (`cleanPodPolicy` Running or All; None keeps them). Deleting the TFJob deletes its pods
and Services.
"""

from __future__ import annotations

import json
import shutil
import threading
from typing import Any

from mlsubmit.emulator import kube_pods

GROUP_VERSION = "kubeflow.org/v1"
RESOURCES = {"tfjobs": ("TFJob", True)}
LABEL = "training.kubeflow.org/"
DEFAULT_PORT = 2222


def _now() -> str:
    from mlsubmit.emulator.kube_jobs import now

    return now()


def _port(replica: dict[str, Any]) -> int:
    for container in replica["template"]["spec"]["containers"]:
        for port in container.get("ports") or []:  # JSON null is an empty list to the API server
            if port.get("name") == "tfjob-port":
                return int(port["containerPort"])
    return DEFAULT_PORT


def cluster_of(tfjob: dict[str, Any], ns: str) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """({type: [DNS address]}, {type: [emulated 127.0.0.1 address]}) of the TFJob's training cluster (pure but for
    the emulated ports)."""
    name, real, local = tfjob["metadata"]["name"], {}, {}
    for kind, replica in tfjob["spec"]["tfReplicaSpecs"].items():
        kind = kind.lower()
        if kind == "evaluator":
            continue
        hosts = [f"{name}-{kind}-{i}.{ns}.svc" for i in range(int(replica.get("replicas", 1)))]
        real[kind] = [f"{h}:{_port(replica)}" for h in hosts]
        local[kind] = [f"127.0.0.1:{kube_pods.port_of(h)}" for h in hosts]
    return real, local


class Controller:
    def __init__(self, store: Any):
        self.store = store
        self.runners: dict[str, list[kube_pods.Pod]] = {}  # TFJob uid → its pods

    def create(self, ns: str, tfjob: dict[str, Any]) -> None:
        store, meta = self.store, tfjob["metadata"]
        name, uid = meta["name"], meta["uid"]
        tfjob["status"] = {"startTime": _now(), "replicaStatuses": {}, "conditions": [
            {"type": "Created", "status": "True", "reason": "TFJobCreated", "message": f"TFJob {ns}/{name} is created.",
             "lastTransitionTime": _now()},
            {"type": "Running", "status": "True", "reason": "TFJobRunning",
             "message": f"TFJob {ns}/{name} is running.", "lastTransitionTime": _now()}]}
        _, local = cluster_of(tfjob, ns)
        owner = [{"apiVersion": GROUP_VERSION, "kind": "TFJob", "name": name, "uid": uid, "controller": True,
                  "blockOwnerDeletion": True}]
        self.runners[uid] = []
        for kind, replica in tfjob["spec"]["tfReplicaSpecs"].items():
            rtype = kind.lower()
            tfjob["status"]["replicaStatuses"][kind] = {"active": int(replica.get("replicas", 1))}
            for index in range(int(replica.get("replicas", 1))):
                template = json.loads(json.dumps(replica["template"]))
                pod_name = f"{name}-{rtype}-{index}"
                labels = {**((template.get("metadata") or {}).get("labels") or {}), LABEL + "job-name": name,
                          LABEL + "replica-type": rtype, LABEL + "replica-index": str(index),
                          LABEL + "operator-name": "tfjob-controller"}
                pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {
                    "name": pod_name, "labels": labels, "ownerReferences": owner},
                    "spec": {**template["spec"], "hostname": pod_name, "subdomain": pod_name, "nodeName": "emulator"},
                    "status": {"phase": "Running", "startTime": _now(), "podIP": "127.0.0.1"}}
                store.add("services", ns, {"apiVersion": "v1", "kind": "Service", "metadata": {
                    "name": pod_name, "labels": labels, "ownerReferences": owner}, "spec": {
                    "clusterIP": "None", "selector": {LABEL + "job-name": name, LABEL + "replica-type": rtype,
                                                      LABEL + "replica-index": str(index)}}})
                store.add("pods", ns, pod)
                runner = kube_pods.Pod(pod, kube_pods.new_workdir(store.root, pod_name))
                store.pods[(ns, pod_name)] = runner
                self.runners[uid].append(runner)
                tf_config = {"cluster": local, "task": {"type": rtype, "index": index}, "environment": "cloud"}
                kube_pods.start_pod(runner, lambda cm: store._config_map(ns, cm), {"TF_CONFIG": json.dumps(tf_config)},
                                    lambda p, code, kind=kind: self._exited(ns, tfjob, kind, p, code))
        deadline = (tfjob["spec"].get("runPolicy") or {}).get("activeDeadlineSeconds")
        if deadline:
            timer = threading.Timer(float(deadline), self._end, args=(ns, tfjob, "Failed", "DeadlineExceeded",
                                                                       f"TFJob {ns}/{name} has failed because it "
                                                                       "was active longer than specified deadline"))
            timer.daemon = True
            timer.start()

    def _exited(self, ns: str, tfjob: dict[str, Any], kind: str, pod: kube_pods.Pod, code: int) -> None:
        with self.store.lock:
            pod.obj["status"].update(phase="Succeeded" if code == 0 else "Failed", containerStatuses=[{
                "name": "tensorflow", "ready": False, "restartCount": 0, "image": "", "imageID": "",
                "state": {"terminated": {"exitCode": code, "finishedAt": _now(),
                                         "reason": "Completed" if code == 0 else "Error"}}}])
            counts = tfjob["status"]["replicaStatuses"][kind]
            counts["active"] = max(0, counts.get("active", 1) - 1)
            key = "succeeded" if code == 0 else "failed"
            counts[key] = counts.get(key, 0) + 1
            pod.done.set()
        types = tfjob["spec"]["tfReplicaSpecs"]
        decisive = "Chief" if "Chief" in types else "Worker"
        name = tfjob["metadata"]["name"]
        if code != 0 and not pod.stopped:
            self._end(ns, tfjob, "Failed", "TFJobFailed",
                      f"TFJob {ns}/{name} has failed because 1 {kind} replica(s) failed.")
        elif code == 0 and kind == decisive and pod.obj["metadata"]["labels"][LABEL + "replica-index"] == "0":
            self._end(ns, tfjob, "Succeeded", "TFJobSucceeded", f"TFJob {ns}/{name} successfully completed.")

    def _end(self, ns: str, tfjob: dict[str, Any], kind: str, reason: str, message: str) -> None:
        with self.store.lock:
            status = tfjob["status"]
            if status.get("completionTime") or tfjob["metadata"]["uid"] not in self.runners:
                return
            status["completionTime"] = _now()
            for condition in status["conditions"]:
                if condition["type"] == "Running":
                    condition["status"] = "False"
            status["conditions"].append({"type": kind, "status": "True", "reason": reason, "message": message,
                                         "lastTransitionTime": _now()})
        policy = (tfjob["spec"].get("runPolicy") or {}).get("cleanPodPolicy", "Running")
        if policy != "None":
            threading.Thread(target=self._remove, args=(ns, tfjob, policy == "All"), daemon=True).start()

    def _remove(self, ns: str, tfjob: dict[str, Any], every: bool) -> None:
        runners = self.runners.get(tfjob["metadata"]["uid"], [])
        running = [r for r in runners if every or not r.done.is_set()]
        for runner in running:
            runner.stop()
        for runner in running:
            runner.done.wait(20)
            with self.store.lock:
                self.store.objects.pop(("pods", ns, runner.obj["metadata"]["name"]), None)
                self.store.pods.pop((ns, runner.obj["metadata"]["name"]), None)
            shutil.rmtree(runner.workdir, ignore_errors=True)

    def delete(self, ns: str, tfjob: dict[str, Any]) -> None:
        """Its pods (stopped) and Services go, as the garbage collector does."""
        uid = tfjob["metadata"]["uid"]
        self._remove(ns, tfjob, every=True)
        self.runners.pop(uid, None)
        with self.store.lock:
            for key, obj in list(self.store.objects.items()):
                if key[0] in ("services", "pods") and any(r.get("uid") == uid for r in
                                                          obj["metadata"].get("ownerReferences", [])):
                    self.store.objects.pop(key)
