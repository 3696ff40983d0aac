"""Where cloud jobs run, one module each behind one small interface (`base.Target`): submit, get, list,
cancel, logs. `vertex` (Vertex AI custom jobs) and `legacy` (AI Platform Training ml v1) map their API's job
JSON to the common `JobStatus`; `follow` waits for a job and streams its logs; `calls` sends requests.

    target = target_for("vertex", clients, project="p", region="us-central1")
"""

from __future__ import annotations

from typing import Any

from mlsubmit.errors import did_you_mean, invalid_value

APIS = ("vertex", "legacy")


def check_api(api: str) -> str:
    if api not in APIS:
        raise invalid_value("--api", api, " or ".join(APIS), hint=did_you_mean(str(api).lower(), APIS))
    return api


def target_for(api: str, clients: Any, *, project: str, region: str, retry: Any = None):
    """The Target of `api` ("vertex" or "legacy") for `project` / `region`, calling through `clients`."""
    from mlsubmit.cloud.storage import RetryPolicy

    retry = retry or RetryPolicy.from_env()
    if check_api(api) == "legacy":
        from mlsubmit.targets.legacy import LegacyTarget

        return LegacyTarget(clients, project=project, region=region, retry=retry)
    from mlsubmit.targets.vertex import VertexTarget

    return VertexTarget(clients, project=project, region=region, retry=retry)
