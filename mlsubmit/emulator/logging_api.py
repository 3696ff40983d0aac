"""Cloud Logging v2 `entries.list` (POST /v2/entries:list) over the lines the jobs' replicas wrote.

Each line is a LogEntry like those the training services write: resource `ml_job` with labels `job_id`,
`project_id` and `task_name`, the task name also under `labels["ml.googleapis.com/task_name"]` (and a legacy
tuning trial's id under `labels["ml.googleapis.com/trial_id"]`, "" for other lines), `textPayload`,
severity INFO for stdout and ERROR for stderr, and an `insertId` that increases with the timestamp (equal
timestamps never happen: the emulator's clock is strictly increasing). gcloud's filters work:
`resource.type="ml_job" AND resource.labels.job_id="…"`, a task name, `timestamp>=`/`>` bounds and
`(timestamp="T" AND insertId>"I") OR timestamp>"T"` continuation; `orderBy` "timestamp asc|desc"; paging.
"""

from __future__ import annotations

import urllib.parse
from functools import partial
from typing import Any

from mlsubmit.emulator import paging
from mlsubmit.emulator.errors import field_error
from mlsubmit.emulator.filters import Fields, compile_filter, time_field
from mlsubmit.emulator.server import Request, Router
from mlsubmit.emulator.store import LogLine
from mlsubmit.emulator.validation import checked_body

PAGE = (50, 1000)  # entries.list's default and largest page
TASK_LABEL = "ml.googleapis.com/task_name"


class Severity(int):
    """A LogSeverity, ordered as Cloud Logging orders them (`severity>=ERROR`)."""

    NAMES = {"DEFAULT": 0, "DEBUG": 100, "INFO": 200, "NOTICE": 300, "WARNING": 400, "ERROR": 500,
             "CRITICAL": 600, "ALERT": 700, "EMERGENCY": 800}

    @classmethod
    def from_literal(cls, text: str) -> "Severity":
        if text.upper() not in cls.NAMES:
            raise ValueError(f"expected a severity ({', '.join(cls.NAMES)}); received {text!r}")
        return cls(cls.NAMES[text.upper()])


def render(line: LogLine) -> dict[str, Any]:
    """The LogEntry of one line."""
    log = urllib.parse.quote(f"ml.googleapis.com/{line.job_id}", safe="")
    return {"logName": f"projects/{line.project}/logs/{log}",
            "resource": {"type": "ml_job", "labels": {"job_id": line.job_id, "project_id": line.project,
                                                      "task_name": line.task}},
            "labels": {TASK_LABEL: line.task, "ml.googleapis.com/trial_id": line.trial_id},
            "textPayload": line.text, "timestamp": line.timestamp, "receiveTimestamp": line.timestamp,
            "severity": line.severity, "insertId": line.insert_id}


FIELDS = Fields({"resource.type": lambda e: e["resource"]["type"],
                 "resource.labels": lambda e: e["resource"]["labels"], "labels": lambda e: e["labels"],
                 "logName": lambda e: e["logName"], "log_name": lambda e: e["logName"],
                 "textPayload": lambda e: e["textPayload"], "severity": lambda e: Severity.from_literal(e["severity"]),
                 "insertId": lambda e: e["insertId"], "timestamp": time_field("timestamp"),
                 "receiveTimestamp": time_field("receiveTimestamp")}, maps=("resource.labels", "labels"))


def list_entries(emulator: Any, request: Request) -> tuple[int, dict]:
    body = checked_body("logging.v2", "ListLogEntriesRequest", request.body or {})
    projects = set()
    for index, name in enumerate(body["resourceNames"]):
        if not name.startswith("projects/") or "/" in name[len("projects/"):]:
            raise field_error(f"resourceNames[{index}]", f"expected projects/PROJECT_ID; received {name!r} "
                                                         "(the emulator keeps project logs only)")
        projects.add(name[len("projects/"):])
    order = " ".join(str(body.get("orderBy") or "timestamp asc").split()).lower()
    if order not in ("timestamp", "timestamp asc", "timestamp desc"):
        raise field_error("orderBy", f"expected 'timestamp asc' or 'timestamp desc'; received {body['orderBy']!r}")
    descending = order.endswith("desc")
    match = compile_filter(body.get("filter"), FIELDS)
    entries = [render(line) for line in emulator.store.log_lines() if line.project in projects]
    selected = [entry for entry in entries if match(entry)]
    if descending:
        selected.reverse()
    size = paging.page_size(body.get("pageSize"), default=PAGE[0], maximum=PAGE[1])
    page, token = paging.paginate(selected, key=lambda e: e["insertId"], size=size, token=body.get("pageToken"),
                                  descending=descending, query=[sorted(projects), body.get("filter"), order])
    response: dict[str, Any] = {"entries": page} if page else {}
    if token:
        response["nextPageToken"] = token
    return 200, response


def register(router: Router, emulator: Any) -> None:
    router.add("POST", r"/v2/entries:list", partial(list_entries, emulator))
