"""The emulator's REST surface through google-api-python-client (and raw HTTP for what a client library would
never send): bad input answered in Google's error shape, 404/409, list filters and paging, delete, and fault
injection — including a dropped create response, the case that makes naive retries create two jobs."""

from __future__ import annotations

import json

import pytest
from googleapiclient.errors import HttpError

from mlsubmit.images import carried
from mlsubmit.jobspec.requests import legacy_job, vertex_custom_job
from mlsubmit.jobspec.spec import JobSpec, Pool

PROJECT = "api-project"
PARENT = f"projects/{PROJECT}/locations/us-central1"
VERTEX_PATH = f"/v1/{PARENT}/customJobs"

pytest_plugins = ["support.training_emulator"]  # fixtures: training_emulator, task_package, emulator_home


SKLEARN = "us-docker.pkg.dev/vertex-ai/training/sklearn-cpu.1-6:latest"


def vertex_body(uri: str, name: str = "api-job", labels=(), args=("--lines", "0")) -> dict:
    return vertex_custom_job(JobSpec(tier="CUSTOM", chief=Pool("chief", "n1-standard-4"), job_name=name,
                                     labels=labels, package_uris=(uri,), python_module="tinypkg.task", args=args))


def legacy_body(uri: str, job_id: str, labels=()) -> dict:
    return legacy_job(JobSpec(job_name=job_id, labels=labels, package_uris=(uri,), python_module="tinypkg.task",
                              args=("--lines", "0")))


def error_of(err: HttpError) -> dict:
    return json.loads(err.content)["error"]


def violated_fields(error: dict) -> list[str]:
    return [v["field"] for d in error.get("details", []) for v in d.get("fieldViolations", [])]


def test_invalid_bodies_get_400_naming_the_field(training_emulator, task_package):
    _, uri = task_package
    jobs = training_emulator.vertex_jobs()
    cases = []
    body = vertex_body(uri)
    body["jobSpec"]["workerPoolSpecs"][0]["replicas"] = "1"  # unknown field
    cases.append((body, "jobSpec.workerPoolSpecs[0].replicas", "did you mean 'replicaCount'?"))
    body = vertex_body(uri)
    del body["displayName"]
    cases.append((body, "displayName", "required field is missing"))
    body = vertex_body(uri)
    body["jobSpec"]["workerPoolSpecs"][0]["machineSpec"]["machineType"] = "n1-standard-3"
    cases.append((body, "jobSpec.workerPoolSpecs[0].machineSpec.machineType", "n1-standard-3"))
    body = vertex_body(uri)  # the package on the public TensorFlow image: its URIs are in the container's command
    pool = body["jobSpec"]["workerPoolSpecs"][0]
    carried.set_program(pool, {**carried.program(pool), "packageUris": [uri.replace(".tar.gz", "-x.tar.gz")]})
    cases.append((body, "jobSpec.workerPoolSpecs[0].containerSpec.command", "does not exist"))
    body = vertex_body(uri)
    pool = body["jobSpec"]["workerPoolSpecs"][0]
    pool["pythonPackageSpec"] = {**carried.program(pool), "executorImageUri": SKLEARN,
                                 "packageUris": [uri.replace(".tar.gz", "-x.tar.gz")]}
    del pool["containerSpec"]
    cases.append((body, "jobSpec.workerPoolSpecs[0].pythonPackageSpec.packageUris[0]", "does not exist"))
    body = vertex_body(uri)
    body["jobSpec"]["workerPoolSpecs"][0]["containerSpec"] = {"imageUri": "gcr.io/x/y"}
    cases.append((body, "jobSpec.workerPoolSpecs[0].containerSpec", "Python packages only"))
    for body, field, says in cases:
        with pytest.raises(HttpError) as err:
            jobs.create(parent=PARENT, body=body).execute()
        error = error_of(err.value)
        assert (err.value.status_code, error["status"]) == (400, "INVALID_ARGUMENT"), error
        assert field in violated_fields(error) and says in json.dumps(error), error
    legacy = training_emulator.legacy_jobs()
    body = legacy_body(uri, "ok_id")
    body["jobId"] = "1-bad-id"
    del body["trainingInput"]["pythonModule"]
    with pytest.raises(HttpError) as err:
        legacy.create(parent=f"projects/{PROJECT}", body=body).execute()
    assert violated_fields(error_of(err.value)) == ["trainingInput.pythonModule"]
    body["trainingInput"]["pythonModule"] = "tinypkg.task"
    with pytest.raises(HttpError) as err:
        legacy.create(parent=f"projects/{PROJECT}", body=body).execute()
    assert violated_fields(error_of(err.value)) == ["jobId"]
    assert not jobs.list(parent=PARENT).execute().get("customJobs")  # nothing was created


@pytest.mark.parametrize("data, content_type, says", [
    (b'{"displayName": "x",', "application/json", "Invalid JSON payload received."),
    (b'["a list"]', "application/json", "Expected an object"),
    (b'{"displayName": NaN}', "application/json", "Invalid JSON payload received."),
    (b"\xff\xfe", "application/json", "not UTF-8"),
    (b'{"displayName": "x"}', "text/plain", "Unexpected Content-Type 'text/plain'"),
    (b"{" + b" " * 2_000_000 + b"}", "application/json", "Request payload size exceeds the limit"),
])
def test_malformed_requests_get_google_errors_and_the_emulator_keeps_serving(training_emulator, data, content_type,
                                                                            says):
    status, answer = training_emulator.raw("POST", f"{VERTEX_PATH}?access_token=tok-abc", data, content_type)
    assert status == 400 and answer["error"]["status"] == "INVALID_ARGUMENT" and says in answer["error"]["message"]
    assert training_emulator.admin("GET", "health")["status"] == "ok"


def test_unknown_jobs_are_404_and_tokens_are_never_logged(training_emulator):
    with pytest.raises(HttpError) as err:
        training_emulator.vertex_jobs().get(name=f"{PARENT}/customJobs/123").execute()
    assert err.value.status_code == 404 and error_of(err.value)["status"] == "NOT_FOUND"
    for call in (training_emulator.legacy_jobs().get(name=f"projects/{PROJECT}/jobs/nope"),
                 training_emulator.legacy_jobs().cancel(name=f"projects/{PROJECT}/jobs/nope", body={})):
        with pytest.raises(HttpError) as err:
            call.execute()
        assert err.value.status_code == 404
    status, answer = training_emulator.raw("GET", "/v1/projects/p/somethingElse?access_token=tok-abc")
    assert status == 404 and answer["error"]["status"] == "NOT_FOUND"
    logged = training_emulator.stderr_path.read_text()
    assert "GET /v1/projects/p/somethingElse -> 404" in logged
    assert "tok-abc" not in logged and "secret-xyz" not in logged


def test_duplicate_legacy_job_id_is_409(training_emulator, task_package):
    _, uri = task_package
    jobs = training_emulator.legacy_jobs()
    jobs.create(parent=f"projects/{PROJECT}", body=legacy_body(uri, "twice")).execute()
    with pytest.raises(HttpError) as err:
        jobs.create(parent=f"projects/{PROJECT}", body=legacy_body(uri, "twice")).execute()
    assert err.value.status_code == 409 and error_of(err.value)["status"] == "ALREADY_EXISTS"


def test_list_filters_and_pages(training_emulator, task_package):
    _, uri = task_package
    jobs = training_emulator.vertex_jobs()
    made = [jobs.create(parent=PARENT, body=vertex_body(uri, f"sweep-{i}", (("sweep", "s1"), ("arm", f"a{i % 2}"))))
            .execute() for i in range(5)]
    for job in made:
        training_emulator.wait(jobs.get(name=job["name"]).execute)
    seen, request = [], jobs.list(parent=PARENT, filter='labels.sweep="s1"', pageSize=2)
    pages = 0
    while request is not None:
        page = request.execute()
        seen += [j["displayName"] for j in page["customJobs"]]
        request, pages = jobs.list_next(request, page), pages + 1
    assert pages == 3 and seen == [f"sweep-{i}" for i in range(4, -1, -1)]  # newest first, each once
    odd = jobs.list(parent=PARENT, filter='labels.arm=a1 AND state=JOB_STATE_SUCCEEDED').execute()["customJobs"]
    assert sorted(j["displayName"] for j in odd) == ["sweep-1", "sweep-3"]
    one = jobs.list(parent=PARENT, filter='display_name="sweep-2"').execute()["customJobs"]
    assert [j["name"] for j in one] == [made[2]["name"]]
    with pytest.raises(HttpError) as err:
        jobs.list(parent=PARENT, filter="colour=red").execute()
    assert err.value.status_code == 400 and violated_fields(error_of(err.value)) == ["filter"]
    legacy = training_emulator.legacy_jobs()
    legacy.create(parent=f"projects/{PROJECT}", body=legacy_body(uri, "listed_1", (("sweep", "s2"),))).execute()
    found = legacy.list(parent=f"projects/{PROJECT}", filter='labels.sweep="s2"').execute()["jobs"]
    assert [j["jobId"] for j in found] == ["listed_1"]


def test_delete_needs_an_ended_job(training_emulator, task_package):
    _, uri = task_package
    jobs = training_emulator.vertex_jobs()
    job = jobs.create(parent=PARENT, body=vertex_body(uri, "to-delete", args=("--sleep", "60"))).execute()
    with pytest.raises(HttpError) as err:
        jobs.delete(name=job["name"]).execute()
    assert err.value.status_code == 400 and error_of(err.value)["status"] == "FAILED_PRECONDITION"
    jobs.cancel(name=job["name"], body={}).execute()
    training_emulator.wait(jobs.get(name=job["name"]).execute)
    operation = jobs.delete(name=job["name"]).execute()
    assert operation["done"] is True and operation["name"].startswith(job["name"] + "/operations/")
    with pytest.raises(HttpError) as err:
        jobs.get(name=job["name"]).execute()
    assert err.value.status_code == 404


def test_injected_faults_answer_the_next_requests_then_stop(training_emulator):
    jobs = training_emulator.vertex_jobs()
    training_emulator.arm_faults(status=503, count=2, method="GET", path="/customJobs")
    assert training_emulator.raw("POST", "/v2/entries:list", b"{}")[1]["error"]["status"] != "UNAVAILABLE"
    for _ in range(2):
        status, answer = training_emulator.raw("GET", f"{VERTEX_PATH}?pageSize=1")
        assert (status, answer["error"]["status"]) == (503, "UNAVAILABLE")
    assert training_emulator.raw("GET", f"{VERTEX_PATH}?pageSize=1")[0] == 200
    training_emulator.arm_faults(status=503, count=1)
    assert "customJobs" not in jobs.list(parent=PARENT, filter='labels.none="x"').execute(num_retries=2)
    training_emulator.arm_faults(status=429, count=1)
    with pytest.raises(HttpError) as err:
        jobs.list(parent=PARENT).execute()  # no retries: the client sees the 429
    assert err.value.status_code == 429 and error_of(err.value)["status"] == "RESOURCE_EXHAUSTED"
    training_emulator.arm_faults(reset=1)
    jobs.list(parent=PARENT, pageSize=1).execute(num_retries=2)
    assert [f.split()[0] for f in training_emulator.admin("GET", "faults")["fired"]] == [
        "status:503", "status:503", "status:503", "status:429", "reset"]
    status, answer = training_emulator.raw("POST", "/emulator/v1/faults", b'{"status": 200}')
    assert status == 400 and answer["error"]["details"][0]["fieldViolations"][0]["field"] == "status"
    assert training_emulator.admin("DELETE", "faults")["armed"] == []


def test_a_dropped_create_response_makes_naive_retries_create_two_vertex_jobs(training_emulator, task_package):
    _, uri = task_package
    jobs = training_emulator.vertex_jobs()
    training_emulator.arm_faults(drop_create_response=1)
    jobs.create(parent=PARENT, body=vertex_body(uri, "dropped", (("run", "dropped"),))).execute(num_retries=2)
    twins = jobs.list(parent=PARENT, filter='labels.run="dropped"').execute()["customJobs"]
    assert len(twins) == 2  # the first create did make a job; its answer was lost
    legacy = training_emulator.legacy_jobs()
    training_emulator.arm_faults(drop_create_response=1)
    with pytest.raises(HttpError) as err:  # legacy: the retry of a client-chosen id meets the job it made
        legacy.create(parent=f"projects/{PROJECT}", body=legacy_body(uri, "dropped_once")).execute(num_retries=2)
    assert err.value.status_code == 409
    assert legacy.get(name=f"projects/{PROJECT}/jobs/dropped_once").execute()["jobId"] == "dropped_once"
