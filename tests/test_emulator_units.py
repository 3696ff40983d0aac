"""The emulator's pure parts: list filters (AIP-160 and the Logging query language gcloud sends), page tokens,
request validation against the discovery documents, and the store's persistence across a restart."""

from __future__ import annotations

import json

import pytest

from mlsubmit.emulator.errors import ApiError
from mlsubmit.emulator.filters import Fields, compile_filter, time_field
from mlsubmit.emulator.logging_api import FIELDS as LOG_FIELDS
from mlsubmit.emulator.logging_api import render
from mlsubmit.emulator.paging import paginate
from mlsubmit.emulator.store import Job, Store
from mlsubmit.emulator.validation import checked_body

JOBS = Fields({"state": lambda r: r["state"], "display_name": lambda r: r.get("displayName"),
               "labels": lambda r: r.get("labels") or {}, "create_time": time_field("createTime")}, maps=("labels",))
JOB = {"state": "JOB_STATE_RUNNING", "displayName": "sweep-3", "labels": {"team": "ml", "request-id": "r1"},
       "createTime": "2024-05-01T12:00:00.000001Z"}


@pytest.mark.parametrize("text, expected", [
    ("", True),
    ("state=JOB_STATE_RUNNING", True),
    ('state="JOB_STATE_FAILED" OR labels.team:*', True),
    ("state=JOB_STATE_FAILED labels.team=ml", False),  # juxtaposition is AND
    ('NOT display_name="sweep-3"', False),
    ('-labels.team="ml"', False),
    ('labels.request-id="r1" AND display_name=~"^sweep-[0-9]+$"', True),
    ("labels:team AND NOT labels:owner", True),
    ('labels.owner!="x"', True),
    ('create_time>"2024-05-01T12:00:00Z" AND create_time<2024-05-02', True),
    ('(state=JOB_STATE_QUEUED OR state=JOB_STATE_RUNNING) AND labels.team="ml"', True),
])
def test_job_filters(text, expected):
    assert compile_filter(text, JOBS)(JOB) is expected


@pytest.mark.parametrize("text, says", [
    ("color=red", "Unsupported field 'color'"),
    ("state", "expected a comparison"),
    ('state="RUNNING', "unterminated string"),
    ("(state=X", "expected ')'"),
    ("labels=ml", "labels is a map"),
])
def test_bad_filters_are_400_naming_filter(text, says):
    with pytest.raises(ApiError) as err:
        compile_filter(text, JOBS)(JOB)
    assert err.value.code == 400 and says in err.value.message
    assert err.value.violations[0][0] == "filter"


def _line(insert_id: str, timestamp: str, task: str, severity: str = "INFO"):
    from mlsubmit.emulator.store import LogLine

    return render(LogLine(insert_id, timestamp, "job_1", "p", task, severity, f"text {insert_id}"))


def test_gcloud_log_filters_select_the_lines_after_a_position():
    entries = [_line("000000000001", "2024-05-01T12:00:00.000001Z", "master-replica-0"),
               _line("000000000002", "2024-05-01T12:00:00.000002Z", "worker-replica-0", "ERROR"),
               _line("000000000003", "2024-05-01T12:00:00.000003Z", "master-replica-0")]
    base = 'resource.type="ml_job" AND resource.labels.job_id="job_1"'
    after = ('((timestamp="2024-05-01T12:00:00.000001Z" AND insertId>"000000000001") OR '
             'timestamp>"2024-05-01T12:00:00.000001Z")')

    def ids(text):
        match = compile_filter(text, LOG_FIELDS)
        return [e["insertId"][-1] for e in entries if match(e)]

    assert ids(base) == ["1", "2", "3"]
    assert ids(f"{base} AND {after}") == ["2", "3"]
    assert ids(f'{base} AND labels."ml.googleapis.com/task_name"="master-replica-0"') == ["1", "3"]
    assert ids(f'{base} AND resource.labels.task_name="worker-replica-0"') == ["2"]
    assert ids(f'{base} AND timestamp>="2024-05-01T12:00:00.000002Z"') == ["2", "3"]
    assert ids("severity>=ERROR") == ["2"]
    assert ids('resource.labels.job_id="other"') == []


def test_page_tokens_continue_after_the_last_item_and_are_bound_to_their_query():
    items = list(range(10, 0, -1))  # newest first
    page, token = paginate(items, key=lambda i: i, size=4, token=None, query="q", descending=True)
    assert page == [10, 9, 8, 7]
    items.insert(0, 11)  # a new item between pages does not shift the next page
    page, token = paginate(items, key=lambda i: i, size=4, token=token, query="q", descending=True)
    assert page == [6, 5, 4, 3]
    page, last = paginate(items, key=lambda i: i, size=4, token=token, query="q", descending=True)
    assert page == [2, 1] and last is None
    for bad_token, query in ((token, "other query"), ("not-a-token", "q")):
        with pytest.raises(ApiError) as err:
            paginate(items, key=lambda i: i, size=4, token=bad_token, query=query, descending=True)
        assert err.value.violations[0][0] == "pageToken"


def test_validation_names_every_bad_field_and_drops_output_only_ones():
    body = {"displayName": "x", "state": "JOB_STATE_SUCCEEDED", "createTime": "2020-01-01T00:00:00Z",
            "jobSpec": {"workerPoolSpecs": [{"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": 1,
                                             "pythonPackageSpec": {"executorImageUri": "i", "pythonModule": "m",
                                                                   "packageUris": ["gs://b/p.tar.gz"]}}]}}
    cleaned = checked_body("aiplatform.v1", "GoogleCloudAiplatformV1CustomJob", body)
    assert "state" not in cleaned and "createTime" not in cleaned and cleaned["displayName"] == "x"
    del body["displayName"]
    body["jobSpec"]["workerPoolSpecs"][0]["pythonPackageSpec"].pop("pythonModule")
    with pytest.raises(ApiError) as err:
        checked_body("aiplatform.v1", "GoogleCloudAiplatformV1CustomJob", body)
    assert [field for field, _ in err.value.violations] == [
        "displayName", "jobSpec.workerPoolSpecs[0].pythonPackageSpec.pythonModule"]
    assert err.value.body()["error"]["details"][0]["@type"] == "type.googleapis.com/google.rpc.BadRequest"


def test_a_restart_keeps_jobs_and_logs_and_fails_the_ones_that_were_running(tmp_path):
    store = Store(tmp_path)
    done = store.add(Job(name="projects/p/jobs/done", api="legacy", job_id="done", project="p", body={"jobId": "done"}))
    store.update(done.name, state="SUCCEEDED", end_time="2024-05-01T12:00:00Z")
    running = store.add(Job(name="projects/p/jobs/busy", api="legacy", job_id="busy", project="p", body={}))
    store.update(running.name, state="RUNNING")
    store.append_log(running, "master-replica-0", "epoch 1")
    store.close()
    with open(tmp_path / "logs" / "projects%2Fp%2Fjobs%2Fbusy.jsonl", "a") as handle:
        handle.write('{"insert_id": "0000')  # a line torn by a crash

    again = Store(tmp_path)
    assert again.get(done.name).state == "SUCCEEDED"
    busy = again.get(running.name)
    assert busy.state == "FAILED" and "stopped while this job was RUNNING" in busy.error and busy.end_time
    assert [line.text for line in again.log_lines()] == ["epoch 1"]
    later = again.append_log(busy, "service", "after the restart")
    assert later.insert_id > again.log_lines()[0].insert_id and later.timestamp > again.log_lines()[0].timestamp
    assert again.add(Job(name=done.name, api="legacy", job_id="done", project="p", body={})) is None
    assert json.loads((tmp_path / "jobs" / "projects%2Fp%2Fjobs%2Fbusy.json").read_text())["state"] == "FAILED"


def test_damaged_job_and_log_files_are_reported_and_the_rest_is_kept(tmp_path):
    store = Store(tmp_path)
    kept = store.add(Job(name="projects/p/jobs/kept", api="legacy", job_id="kept", project="p", body={"jobId": "kept"}))
    store.update(kept.name, state="SUCCEEDED")
    store.append_log(kept, "master-replica-0", "kept line")
    store.close()
    jobs, logs = tmp_path / "jobs", tmp_path / "logs"
    (jobs / "not-json.json").write_bytes(b"\xff\xfe{garbage")
    (jobs / "a-list.json").write_text("[1, 2]")
    bogus = json.loads((jobs / "projects%2Fp%2Fjobs%2Fkept.json").read_text())
    (jobs / "bogus-state.json").write_text(json.dumps({**bogus, "name": "projects/p/jobs/bogus", "state": "WEIRD"}))
    (jobs / "a-directory.json").mkdir()
    (logs / "binary.jsonl").write_bytes(b"\x80\x81 not utf-8\n" + b'{"insert_id": 1}\n' + b"torn")

    again = Store(tmp_path)
    assert [job.name for job in again.jobs()] == ["projects/p/jobs/kept"]
    assert [line.text for line in again.log_lines()] == ["kept line"]
    damaged = sorted(line.split(": ", 1)[0].rsplit("/", 1)[-1] for line in again.damaged)
    assert damaged == ["a-directory.json", "a-list.json", "binary.jsonl", "bogus-state.json", "not-json.json"]
    assert all("\n" not in line for line in again.damaged)
