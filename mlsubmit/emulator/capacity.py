"""Capacity the emulator pretends not to have, so failover and FLEX_START can be tried as users meet them.

    mlsubmit emulator --no-quota us-central1/NVIDIA_H200_141GB --stockout us-east4
    POST   /emulator/v1/capacity {"quota": ["us-central1/NVIDIA_H200_141GB"], "stockout": ["us-east4"]}   add rules
    GET    /emulator/v1/capacity                                                                      the rules
    DELETE /emulator/v1/capacity                     capacity comes back: a waiting FLEX_START job then starts

A rule is `REGION` (every job there) or `REGION/ACCELERATOR` (jobs with a pool of that accelerator there). It
applies to Vertex AI custom jobs:
- quota: the create answers 429 RESOURCE_EXHAUSTED "The following quota metrics exceed quota limits:
  aiplatform.googleapis.com/custom_model_training_…" (the service's words, as users report them); nothing is made.
- stockout: the job is accepted, then FAILED before it runs (no startTime) with RESOURCE_EXHAUSTED "Resources are
  insufficient in region: REGION." (the service's line, as users report it) — unless its scheduling.strategy is
  FLEX_START: it then waits in JOB_STATE_PENDING until the stockout is lifted (it runs) or its maxWaitDuration
  (default 24 h; 0: forever) passes (it fails, RESOURCE_EXHAUSTED).
"""

from __future__ import annotations

import re
import threading
from typing import Any

from mlsubmit.emulator.errors import ApiError, field_error

_RULE = re.compile(r"(?P<region>[a-z][a-z0-9-]{1,62})(/(?P<accelerator>[A-Z][A-Z0-9_]{1,62}))?")
KINDS = ("quota", "stockout")


def parse_rule(text: str, field: str) -> tuple[str, str | None]:
    """'us-east4' -> ('us-east4', None); 'us-east4/NVIDIA_L4' -> ('us-east4', 'NVIDIA_L4'); ValueError naming `field`
    for anything else, and for a rule that could never apply: a region outside mlsubmit's table (a typo such as
    'us-centrall1' would make a failover test pass without failing over) or an accelerator not offered there."""
    from mlsubmit.errors import did_you_mean, shown
    from mlsubmit.jobspec import machines

    said = f"{field}: received {shown(text)}"
    found = _RULE.fullmatch(str(text).strip())
    if not found:
        raise ValueError(f"{said}; expected REGION or REGION/ACCELERATOR, e.g. us-east4/NVIDIA_H200_141GB")
    region, accelerator = found.group("region"), found.group("accelerator")
    if region not in machines.REGIONS:
        guess = did_you_mean(region, machines.REGIONS)
        raise ValueError(f"{said}; expected a region of mlsubmit's table ({', '.join(machines.REGIONS)}): mlsubmit "
                         f"sends no job to {region}, so the rule would never apply" + (f"; {guess}" if guess else ""))
    if accelerator is not None and accelerator not in machines.ACCELERATORS:
        guess = did_you_mean(accelerator, machines.ACCELERATORS)
        raise ValueError(f"{said}; expected an accelerator of the aiplatform v1 enum (e.g. NVIDIA_L4)"
                         + (f"; {guess}" if guess else ""))
    if accelerator is not None and region not in machines.ACCELERATORS[accelerator].regions:
        raise ValueError(f"{said}; {accelerator} is not offered in {region}, so the rule would never apply; "
                         f"regions that offer it: {', '.join(machines.ACCELERATORS[accelerator].regions)}")
    return region, accelerator


def pools_of(body: dict[str, Any]) -> list[str | None]:
    """The accelerator of each worker pool of a CustomJob body (None for a pool without one)."""
    spec = body.get("jobSpec") or body.get("trialJobSpec") or {}
    return [((pool or {}).get("machineSpec") or {}).get("acceleratorType") for pool in spec.get("workerPoolSpecs")
            or () if pool]


def quota_metric(accelerator: str | None) -> str:
    """aiplatform.googleapis.com/custom_model_training_nvidia_t4_gpus (the metric users see), or …_cpus."""
    if not accelerator:
        return "aiplatform.googleapis.com/custom_model_training_cpus"
    name = accelerator.lower().replace("tesla_", "")
    return f"aiplatform.googleapis.com/custom_model_training_{name}_{'tpus' if name.startswith('tpu') else 'gpus'}"


class Capacity:
    """The rules; thread-safe. `changed` is notified whenever they change (waiting FLEX_START jobs look again)."""

    def __init__(self, quota: tuple[str, ...] = (), stockout: tuple[str, ...] = ()):
        self._lock = threading.Lock()
        self.changed = threading.Condition(self._lock)
        self._rules: dict[str, list[tuple[str, str | None]]] = {kind: [] for kind in KINDS}
        for kind, texts in (("quota", quota), ("stockout", stockout)):
            self._rules[kind] += [parse_rule(text, f"--{'no-quota' if kind == 'quota' else kind}") for text in texts]

    def describe(self) -> dict[str, Any]:
        with self._lock:
            return {kind: [f"{r}/{a}" if a else r for r, a in rules] for kind, rules in self._rules.items()}

    def add(self, request: Any) -> dict[str, Any]:
        """Add what a POST body asks for; ApiError 400 for a bad body."""
        if not isinstance(request, dict) or not request or set(request) - set(KINDS):
            raise field_error("", 'expected {"quota": ["REGION[/ACCELERATOR]", …], "stockout": [...]}')
        parsed: dict[str, list[tuple[str, str | None]]] = {}
        for kind in KINDS:
            texts = request.get(kind) or []
            if not isinstance(texts, list) or len(texts) > 100:
                raise field_error(kind, "expected a list of at most 100 REGION[/ACCELERATOR] strings")
            parsed[kind] = []
            for index, text in enumerate(texts):
                try:
                    parsed[kind].append(parse_rule(text, f"{kind}[{index}]"))
                except ValueError as err:
                    raise field_error(f"{kind}[{index}]", str(err)) from None
        with self.changed:
            for kind, rules in parsed.items():
                self._rules[kind] += rules
            self.changed.notify_all()
        return self.describe()

    def clear(self) -> dict[str, Any]:
        with self.changed:
            for rules in self._rules.values():
                rules.clear()
            self.changed.notify_all()
        return self.describe()

    def _matches(self, kind: str, region: str, accelerators: list[str | None]) -> str | None | bool:
        for rule_region, accelerator in self._rules[kind]:
            if rule_region == region and (accelerator is None or accelerator in accelerators):
                return accelerator or next((a for a in accelerators if a), None) or False
        return None

    def check_quota(self, region: str, body: dict[str, Any]) -> None:
        """Raise the service's 429 when a quota rule covers this create."""
        with self._lock:
            found = self._matches("quota", region, pools_of(body))
        if found is not None:
            raise ApiError(429, f"The following quota metrics exceed quota limits: "
                                f"{quota_metric(found or None)}", status="RESOURCE_EXHAUSTED")

    def stocked_out(self, region: str, body: dict[str, Any]) -> bool:
        with self._lock:
            return self._matches("stockout", region, pools_of(body)) is not None

    def wait(self, seconds: float) -> None:
        """Sleep up to `seconds`, or until the rules change."""
        with self.changed:
            self.changed.wait(seconds)
