"""What the two job APIs share: get, list (filter + paging), cancel, and the create steps after the body is
checked. Each API module supplies a `Flavor`: its resource names, state names, resource rendering and
filterable fields.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mlsubmit.emulator import paging
from mlsubmit.emulator.errors import already_exists, failed_precondition, not_found
from mlsubmit.emulator.filters import Fields, compile_filter
from mlsubmit.emulator.plan import JobPlan
from mlsubmit.emulator.server import Request
from mlsubmit.emulator.store import Job

log = logging.getLogger("mlsubmit.emulator")
LIST_PAGE = (100, 1000)  # default and largest page of a list


@dataclass(frozen=True)
class Flavor:
    api: str  # "vertex" or "legacy"
    noun: str  # "CustomJob" or "Job"
    collection: str  # the list response's key: "customJobs" or "jobs"
    states: dict[str, str]  # internal state -> the API's name
    render: Callable[[Job], dict[str, Any]]
    fields: Fields  # filterable fields of a rendered resource
    name: Callable[[dict[str, str]], str]  # resource name from the route's params
    parent: Callable[[dict[str, str]], str]  # the parent collection's prefix from the route's params


def create(emulator: Any, flavor: Flavor, job: Job, plan: JobPlan) -> tuple[int, dict]:
    """Store the job and queue it: the common tail of both creates (the body and plan are checked)."""
    if emulator.store.get(job.name) is not None:
        raise _exists(job)
    emulator.executor.check_packages(plan)
    stored = emulator.store.add(job)
    if stored is None:
        raise _exists(job)
    emulator.executor.submit(stored)
    return 200, flavor.render(stored)


def _exists(job: Job) -> Exception:
    return already_exists(f"Field: job.job_id Error: A job with id {job.job_id!r} already exists in project "
                          f"{job.project!r} (job ids are unique in a project, also after the job ended).")


def find(emulator: Any, flavor: Flavor, request: Request) -> Job:
    name = flavor.name(request.params)
    job = emulator.store.get(name)
    if job is None or job.api != flavor.api:
        raise not_found(f"The {flavor.noun} {name} does not exist (or was deleted).")
    return job


def get(emulator: Any, flavor: Flavor, request: Request) -> tuple[int, dict]:
    return 200, flavor.render(find(emulator, flavor, request))


def list_jobs(emulator: Any, flavor: Flavor, request: Request) -> tuple[int, dict]:
    """Newest first; `filter`, `pageSize`, `pageToken` as the API defines them."""
    prefix = flavor.parent(request.params)
    match = compile_filter(request.query.get("filter"), flavor.fields)
    jobs = [resource for job in emulator.store.jobs() if job.api == flavor.api and job.name.startswith(prefix)
            for resource in _rendered(flavor, job)]
    selected = [resource for resource in jobs if match(resource)]
    size = paging.page_size(request.query.get("pageSize"), default=LIST_PAGE[0], maximum=LIST_PAGE[1])
    page, token = paging.paginate(selected, key=lambda r: r["createTime"], size=size,
                                  token=request.query.get("pageToken"), descending=True,
                                  query=[prefix, request.query.get("filter")])
    body: dict[str, Any] = {flavor.collection: page} if page else {}
    if token:
        body["nextPageToken"] = token
    return 200, body


def _rendered(flavor: Flavor, job: Job) -> list[dict[str, Any]]:
    """[the job's resource], or [] (logged) for a job that cannot be rendered: one bad job never fails a list."""
    try:
        return [flavor.render(job)]
    except Exception:  # noqa: BLE001 - whatever is wrong with it, the other jobs are still listed
        log.exception("cannot render %s; left out of the list", job.name)
        return []


def cancel(emulator: Any, flavor: Flavor, request: Request) -> tuple[int, dict]:
    job = find(emulator, flavor, request)
    if job.is_terminal:
        raise failed_precondition(f"The {flavor.noun} {job.name} is in state {flavor.states[job.state]} and can no "
                                  f"longer be cancelled.")
    emulator.executor.cancel(job.name)
    return 200, {}
