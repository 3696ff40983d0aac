"""The emulated cluster's controllers as pure decisions (no processes): which podFailurePolicy rule a pod's exit
code matches, the child Jobs a JobSet gets, and what the JobSet controller does with their conditions. The same
rules run end to end in tests/test_kube_cluster.py."""

from mlsubmit.emulator import kube_jobs, kube_jobset, kube_openapi
from mlsubmit.jobspec.spec import JobSpec, Pool
from mlsubmit.kube import manifests as m


def _spec():
    return JobSpec(tier="CUSTOM", chief=Pool("chief", "n1-standard-4", 1), worker=Pool("worker", "n1-standard-4", 2),
                   ps=Pool("ps", "n1-standard-4", 1), job_name="js")


def _jobset(max_restarts=0):
    job = m.KubeJob("js", "r1", packages=("gs://b/t.tar.gz",), api="jobset", max_restarts=max_restarts)
    jobset = m.jobset(_spec(), job)
    jobset["metadata"]["uid"] = "u1"
    jobset["status"] = {"restarts": 0}
    return jobset


def test_pod_failure_policy_rules_in_order():
    spec = m.job_manifest(_spec(), m.KubeJob("js", "r1"), "worker")["spec"]
    assert kube_jobs.failure_rule(spec, "replica", 3) == ("FailJob", 1)
    assert kube_jobs.failure_rule(spec, "replica", 7) == ("Count", None)
    assert kube_jobs.failure_rule(spec, "sidecar", 3) == ("Count", None)  # the rule names the container
    assert kube_jobs.failure_rule(spec, "replica", 137, ("DisruptionTarget",)) == ("Ignore", 0)
    not_in = {"podFailurePolicy": {"rules": [{"action": "FailJob", "onExitCodes": {"operator": "NotIn",
                                                                                   "values": [0, 42]}}]}}
    assert kube_jobs.failure_rule(not_in, "c", 42) == ("Count", None)
    assert kube_jobs.failure_rule(not_in, "c", 1) == ("FailJob", 0)


def test_a_jobsets_child_jobs_and_service_are_named_as_the_controller_names_them():
    jobset = _jobset()
    jobs = kube_jobset.child_jobs(jobset)
    assert [j["metadata"]["name"] for j in jobs] == ["js-chief-0", "js-worker-0", "js-ps-0"]
    worker = jobs[1]
    assert worker["metadata"]["labels"][kube_jobset.NAME] == "js"
    assert worker["metadata"]["labels"][m.ROLE_LABEL] == "worker"
    assert worker["spec"]["completions"] == 2 and worker["metadata"]["ownerReferences"][0]["uid"] == "u1"
    pod = worker["spec"]["template"]
    assert pod["spec"]["subdomain"] == "js" and pod["metadata"]["labels"][kube_jobset.RJOB] == "worker"
    assert kube_jobset.service(jobset)["metadata"]["name"] == "js"
    # the launcher's address pattern names the hosts the controller makes: <js>-<role>-0-<i>.<subdomain>
    assert m.address_pattern(m.KubeJob("js", "r1", api="jobset")).format(job="js", role="worker", index=1) == \
        "js-worker-0-1.js:2222"


def _done(job, kind):
    job["status"] = {"conditions": [{"type": kind, "status": "True"}]}
    return job


def test_the_jobset_controller_decides_from_its_jobs_conditions():
    jobset = _jobset(max_restarts=1)
    chief, worker, ps = kube_jobset.child_jobs(jobset)
    assert kube_jobset.decide(jobset, [chief, worker, ps]) is None
    assert kube_jobset.decide(jobset, [_done(chief, "Complete"), worker, ps])[0] == "Completed"  # chief only
    chief, worker, ps = kube_jobset.child_jobs(jobset)
    assert kube_jobset.decide(jobset, [chief, _done(worker, "Failed"), ps])[0] == "Restart"
    jobset["status"]["restarts"] = 1
    action, reason, message = kube_jobset.decide(jobset, [chief, worker, ps])
    assert (action, reason) == ("Failed", "ReachedMaxRestarts") and "js-worker-0" in message


def test_openapi_documents_carry_the_patch_operation_kubectl_looks_for():
    doc = kube_openapi.document("/apis/batch/v1", {"jobs": ("Job", True)}, "batch/v1")
    patch = doc["paths"]["/apis/batch/v1/namespaces/{namespace}/jobs/{name}"]["patch"]
    assert patch["x-kubernetes-group-version-kind"] == {"group": "batch", "version": "v1", "kind": "Job"}
    assert {"name": "fieldValidation", "in": "query"}.items() <= patch["parameters"][0].items()
    job = m.job_manifest(_spec(), m.KubeJob("js", "r1"), "chief")
    assert kube_openapi.refusal(job) is None
    job["spec"]["template"]["spec"]["containers"][0]["imagePullPolicyy"] = "Always"
    job["spec"]["completions"] = "two"
    code, reason, message = kube_openapi.refusal(job)
    assert (code, reason) == (400, "BadRequest")
    assert message == ('Job in version "v1" cannot be handled as a Job: strict decoding error: unknown field '
                       '"spec.template.spec.containers[0].imagePullPolicyy"')
    del job["spec"]["template"]["spec"]["containers"][0]["imagePullPolicyy"]
    code, reason, message = kube_openapi.refusal(job)
    assert (code, reason) == (422, "Invalid") and message.startswith('Job.batch "js-chief" is invalid: '
                                                                     "spec.completions: Invalid value:")
