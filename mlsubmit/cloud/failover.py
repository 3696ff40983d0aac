"""Failover: the job's alternatives (another region, another machine or GPU), tried in turn when the service has no
capacity for the one before. Pure: parsing, the order, and whether a refusal or a failure is about capacity; the
train command submits (one job live at a time) and says each step.

    --alternative region=us-east4
    --alternative region=europe-west4,machine-type=a3-ultragpu-8g
    --alternative gpu-type=NVIDIA_L4,gpus=4,machine-type=g2-standard-48

An alternative changes the region and/or the chief's machine and accelerators; every other pool on the chief's
machine (workers, evaluators) changes with it; parameter servers keep theirs. Each alternative is a full JobSpec,
validated like the job (machine x accelerator x count x region), with its own request id, so a re-run of the same
command finds the jobs the first run made instead of making them again.

What counts as capacity (and only that moves on; any other failure is the job's own and is never retried
elsewhere):
- the create answers 429 RESOURCE_EXHAUSTED "The following quota metrics exceed quota limits: …" (a quota; e.g.
  vertex-ai-samples#3479, stable-diffusion-on-gcp#12);
- the job ends FAILED before it ever ran (no startTime) with RESOURCE_EXHAUSTED (code 8) or the service's
  stockout line, "Resources are insufficient in region: REGION" (openreview-expertise#401), Compute Engine's
  "does not have enough resources available", or a FLEX_START job whose wait ran out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from mlsubmit.errors import UsageError, invalid_value
from mlsubmit.jobspec import machines
from mlsubmit.jobspec.spec import JobSpec, Pool

KEYS = {"region": "region", "machine-type": "machine_type", "gpu-type": "accelerator_type",
        "accelerator-type": "accelerator_type", "gpus": "accelerator_count", "accelerator-count": "accelerator_count"}
STOCKOUT_MESSAGES = re.compile(r"resources are insufficient|does not have enough resources|stockout|"
                               r"could not be provisioned", re.IGNORECASE)
RESOURCE_EXHAUSTED = 8  # google.rpc.Code


@dataclass(frozen=True)
class Alternative:
    """One --alternative as given: what it changes (None: kept)."""

    text: str
    region: str | None = None
    machine_type: str | None = None
    accelerator_type: str | None = None
    accelerator_count: int | None = None


def parse(text: str) -> Alternative:
    """`region=R,machine-type=M,gpu-type=T,gpus=N` (any of them, at least one)."""
    values: dict[str, Any] = {}
    for item in str(text).split(","):
        key, sep, value = item.partition("=")
        key, value = key.strip().lower(), value.strip()
        if not sep or key not in KEYS or not value or KEYS[key] in values:
            raise invalid_value("--alternative", text, "KEY=VALUE pairs, each key once: region, machine-type, "
                                "gpu-type, gpus", hint="e.g. --alternative region=us-east4,machine-type=a3-ultragpu-8g")
        values[KEYS[key]] = value
    if "accelerator_count" in values:
        from mlsubmit.jobspec.spec import whole_number

        values["accelerator_count"] = whole_number(values["accelerator_count"], f"--alternative {text}: gpus", 1)
    return Alternative(text=str(text), **values)


def apply(spec: JobSpec, alternative: Alternative) -> JobSpec:
    """The job as `alternative` changes it, validated; UsageError naming the alternative otherwise."""
    try:
        changes: dict[str, Any] = {}
        if alternative.region:
            reservation = spec.capacity.reservation
            if reservation is not None and reservation.kind == "SPECIFIC_RESERVATION" \
                    and alternative.region != spec.region:
                raise UsageError(f"the job draws from the reservation {', '.join(reservation.values)}, which is in "
                                 f"one zone of {spec.region}: another region cannot use it")
            changes["region"] = alternative.region
        if alternative.machine_type or alternative.accelerator_type or alternative.accelerator_count:
            chief = spec.pools["chief"]
            new = _chief(chief, alternative)
            pools = {role: (new.replace(role=role, replica_count=pool.replica_count)
                            if (pool.machine_type, pool.accelerator) == (chief.machine_type, chief.accelerator)
                            else pool) for role, pool in spec.pools.items()}
            if any(p.machine.family == "tpu" for p in spec.pools.values()):
                raise UsageError("a TPU job's machines cannot be changed by an alternative")
            changes.update(tier="CUSTOM", **pools)
        return spec.replace(**changes)
    except UsageError as err:
        raise UsageError(f"invalid value for --alternative: received {alternative.text!r}; {err.message}",
                         hint=err.hint) from None


def _chief(chief: Pool, alternative: Alternative) -> Pool:
    machine_name = alternative.machine_type
    accelerator, count = alternative.accelerator_type, alternative.accelerator_count
    if machine_name:
        machine = machines.machine(machine_name, "machine-type")
        if accelerator is None and count is None:
            built_in = machine.implicit
            accelerator, count = built_in if built_in else (None, None)
            if built_in is None and chief.accelerator and chief.accelerator[0] in machine.accelerators:
                accelerator, count = chief.accelerator  # n1 -> another n1: the same GPUs
    else:
        accelerator = accelerator or (chief.accelerator[0] if chief.accelerator else machines.DEFAULT_GPU_TYPE)
        count = count or (chief.accelerator[1] if chief.accelerator else 1)
        machines.accelerator(accelerator, "gpu-type")
        same = chief.machine if count in machines.allowed_counts(chief.machine, accelerator) else None
        machine_name = same.name if same is not None and not same.fixed else \
            machines.default_gpu_machine(accelerator, count)
        if machine_name is None:
            raise UsageError(f"no machine carries {count} {accelerator}; counts offered: "
                             f"{', '.join(map(str, machines.possible_counts(accelerator)))}")
    if accelerator is not None and count is None:
        machine = machines.MACHINES[machines.machine(machine_name, "machine-type").name]
        counts = machine.accelerators.get(accelerator, ())
        count = counts[0] if len(counts) == 1 else 1
    return Pool("chief", machine_name, 1, accelerator, count or 0)


def plan(spec: JobSpec, texts: list[str] | tuple[str, ...], *, cheapest_first: bool = False,
         api: str = "vertex") -> list[JobSpec]:
    """The job and its alternatives, in the order they are tried: as given, or the cheapest first (prices from the
    table; an unknown price goes last). UsageError for an alternative that is the job itself, repeats another,
    or cannot run, and for any alternative of a legacy AI Platform job (mlsubmit fails over on Vertex AI only)."""
    if texts and api == "legacy":
        raise UsageError(f"invalid option for legacy AI Platform: --alternative {texts[0]} (legacy AI Platform has no "
                         "failover: mlsubmit fails over between Vertex AI regions and machines)",
                         hint="drop --alternative, or use --api vertex")
    specs = [spec]
    for text in texts:
        alternative = parse(text)
        changed = apply(spec, alternative)
        for earlier in specs:
            if _same(earlier, changed):
                what = "the job itself" if earlier is spec else "an earlier alternative"
                raise invalid_value("--alternative", text, "a change of region, machine or GPUs that differs from "
                                    f"the job and the other alternatives (this one is {what})",
                                    hint="drop it, or change its region or machine")
        specs.append(changed)
    if cheapest_first:
        specs.sort(key=lambda s: (rate_of(s) is None, rate_of(s) or 0.0))
    return specs


def _same(one: JobSpec, other: JobSpec) -> bool:
    return one.region == other.region and {r: (p.machine_type, p.accelerator, p.replica_count)
                                           for r, p in one.pools.items()} == \
        {r: (p.machine_type, p.accelerator, p.replica_count) for r, p in other.pools.items()}


def rate_of(spec: JobSpec) -> float | None:
    from mlsubmit.jobspec import cost

    return cost.job_rate(spec).usd


def describe(spec: JobSpec) -> str:
    """'us-east4: a3-ultragpu-8g + 8 NVIDIA_H200_141GB' (the chief's machine) with its rate when known."""
    chief = spec.pools["chief"]
    accelerator = chief.accelerator
    machine = chief.machine_type + (f" + {accelerator[1]} {accelerator[0]}" if accelerator else "")
    tpu = [p for p in spec.pools.values() if p.accelerator_kind == "tpu" and p is not chief]
    if tpu:
        machine += f", TPU {tpu[0].machine_type}"
    rate = rate_of(spec)
    from mlsubmit.jobspec.cost import money

    return f"{spec.region}: {machine} ({money(rate) + '/h' if rate is not None else 'price unknown'})"


def is_stockout(status: Any) -> bool:
    """Whether a job ended FAILED for lack of capacity before it ever ran (a targets JobStatus)."""
    if status.state != "FAILED" or status.start_time:
        return False
    error = (status.resource or {}).get("error") or {}
    return error.get("code") == RESOURCE_EXHAUSTED or bool(STOCKOUT_MESSAGES.search(status.error or ""))
