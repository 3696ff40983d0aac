"""What a job costs: its hourly rate before it is sent, the time limit a budget allows, and what a running or
finished job has cost so far. Pure functions over a JobSpec (or a job's own resource) and the price table
(mlsubmit.jobspec.prices); the CLI renders what they return.

A job's rate is the sum over its pools of replicas x (machine + accelerators); a tuning study runs
`parallel` trials at once and `total` in all; `--backends` runs one job per backend. A budget (`--max-cost`) sets
the job's time limit so that every job it makes, running the whole limit at the rate, costs at most the budget
(whole seconds, rounded down). Compute Engine bills at least one minute of a VM and then by the second ("VM
instance pricing", billing model): a budget that cannot pay for `MIN_BILLED_SECONDS` of the job is refused. A price
derived from Compute Engine's (prices.RULES) is a price like any other here, and the estimate says which are derived.

Example:
    >>> from mlsubmit.jobspec.spec import JobSpec
    >>> job_rate(JobSpec(tier="BASIC")).usd
    0.21849885
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Iterable

from mlsubmit.errors import UsageError, invalid_value
from mlsubmit.jobspec import prices

MIN_BILLED_SECONDS = 60
BUDGET_LABEL = "mlsubmit_max_cost"  # the budget, in a label value's characters: 12.5 -> "12_5" (USD)
SPOT_NOTE = "spot prices may change (up to once a day) and a spot job may be preempted; it resumes from its backup"
GKE_SPOT_NODE_SELECTOR = {"cloud.google.com/gke-spot": "true"}  # REFERENCE.md: GKE's spot node label


@dataclass(frozen=True)
class PoolRate:
    role: str
    replicas: int
    rate: prices.Rate

    @property
    def usd(self) -> float | None:
        return None if self.rate.usd is None else round(self.replicas * self.rate.usd, 10)


@dataclass(frozen=True)
class JobRate:
    """The hourly rate of one job, per pool; `usd` is None when any pool has no known price."""

    pools: tuple[PoolRate, ...]
    region: str
    catalog: str
    spot: bool

    @property
    def usd(self) -> float | None:
        values = [p.usd for p in self.pools]
        return None if any(v is None for v in values) else round(sum(values), 10)  # type: ignore[arg-type]

    @property
    def missing(self) -> list[str]:
        return list(dict.fromkeys(m for p in self.pools for m in p.rate.missing))

    @property
    def sources(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(s for p in self.pools for s in p.rate.sources))

    @property
    def derived(self) -> bool:
        return any(p.rate.derived for p in self.pools)

    @property
    def reasons(self) -> dict[str, str]:
        """{what: why it has no price} over the pools, once each."""
        return {what: why for p in self.pools for what, why in p.rate.reasons.items()}

    def why_unknown(self) -> str:
        """'A, B: why; C: why' for the parts without a price, the parts with one reason together."""
        grouped: dict[str, list[str]] = {}
        for what, why in self.reasons.items():
            grouped.setdefault(why, []).append(what)
        return "; ".join(f"{', '.join(whats)}: {why}" for why, whats in grouped.items())


def pools_rate(pools: Iterable[tuple[str, int, str, str | None, int]], region: str, *, catalog: str = "vertex",
               spot: bool = False) -> JobRate:
    """The rate of (role, replicas, machine, accelerator, count) pools."""
    return JobRate(tuple(PoolRate(role, int(replicas), prices.hourly(machine, accelerator, int(count or 0), region,
                                                                       catalog=catalog, spot=spot))
                         for role, replicas, machine, accelerator, count in pools), region, catalog, spot)


def job_rate(spec: Any, *, catalog: str = "vertex") -> JobRate:
    """The hourly rate of the job a JobSpec describes. On Vertex AI, the pools the request sends
    (mlsubmit.jobspec.requests.vertex_pools): a legacy machine type as its Compute Engine equivalent, K80 as T4, and
    no chief beside a TPU worker (Vertex AI runs the program on the TPU VM and drops it)."""
    from mlsubmit.jobspec import machines

    rows = []
    if catalog == "vertex":
        from mlsubmit.jobspec.requests import vertex_pools

        sent, _ = vertex_pools(spec)
        rows = [(role, replicas, name, accelerator, count) for role, (name, accelerator, count, replicas)
                in sent.items()]
        return pools_rate(rows, spec.region, catalog=catalog, spot=getattr(spec, "spot", False))
    for role, pool in spec.pools.items():
        accelerator, count = pool.accelerator or (None, 0)
        if accelerator and catalog == "vertex" and not pool.machine.is_legacy:
            accelerator = machines.vertex_accelerator(pool.machine, accelerator, count)
        rows.append((role, pool.replica_count, pool.machine_type, accelerator, count))
    return pools_rate(rows, spec.region, catalog=catalog, spot=getattr(spec, "spot", False))


def parse_budget(text: Any) -> float:
    """`--max-cost USD` as a positive, finite number of dollars; UsageError otherwise."""
    value = str(text).strip().lstrip("$")
    if not re.fullmatch(r"[0-9]+(\.[0-9]+)?|\.[0-9]+", value) or float(value) <= 0 or not math.isfinite(float(value)):
        raise invalid_value("--max-cost", text, "a positive amount of US dollars such as 25 or 7.50")
    return float(value)


def budget_label(budget: float) -> str:
    """A label value for the budget (label values allow a-z, 0-9, _ and - only): 7.5 -> '7_5'."""
    return f"{budget:.2f}".rstrip("0").rstrip(".").replace(".", "_")


def budget_of(labels: dict[str, str]) -> float | None:
    """The budget stored in a job's labels by `budget_label`, or None."""
    text = (labels or {}).get(BUDGET_LABEL)
    if not text or not re.fullmatch(r"[0-9]+(_[0-9]+)?", text):
        return None
    return float(text.replace("_", "."))


def seconds(total: int) -> str:
    """7260 -> '2h01m00s'."""
    hours, rest = divmod(int(total), 3600)
    return f"{hours}h{rest // 60:02d}m{rest % 60:02d}s" if hours else f"{rest // 60}m{rest % 60:02d}s"


def money(usd: float) -> str:
    return f"${usd:,.4f}" if usd < 10 else f"${usd:,.2f}"


@dataclass(frozen=True)
class Budget:
    """What `--max-cost` allowed: the budget, the time it pays for, and the time limit the job got."""

    usd: float
    allows_seconds: int
    timeout_seconds: int
    limited_by: str  # "--max-cost" or "--max-runtime"
    derived: bool = False  # the rate it was computed from includes derived prices


def apply_budget(spec: Any, budget: float | None, *, catalog: str = "vertex", parallel: int = 1,
                 total: int = 1) -> tuple[Any, Budget | None]:
    """The spec with the time limit `budget` allows (the smaller of it and the spec's own), and what was decided.

    `total` jobs (trials x backends) each run at most the limit at the job's rate, so together they cost at most
    the budget: limit = floor(budget x 3600 / (total x rate)) seconds. The budget goes into a label
    (BUDGET_LABEL) so `mlsubmit jobs describe` can show it.
    Raises:
        UsageError: no known price for the job, or a budget below MIN_BILLED_SECONDS of it.
    """
    if budget is None:
        return spec, None
    rate = job_rate(spec, catalog=catalog)
    if rate.usd is None:
        raise UsageError(f"invalid value for --max-cost: received {budget:g}; no price is known for "
                         f"{rate.why_unknown()} (in {spec.region}, on {prices.CATALOGS[catalog]}), so no time limit "
                         "can keep the job within a budget",
                         hint="use --max-runtime instead, or a machine with a known price (tools/refresh_prices.py "
                              "refreshes the table)")
    per_second = rate.usd * total / 3600
    allows = math.floor(budget / per_second + 1e-9)
    if allows < MIN_BILLED_SECONDS:
        raise UsageError(f"invalid value for --max-cost: received {budget:g}; the job costs {money(rate.usd * total)} "
                         f"an hour{f' ({total} jobs)' if total > 1 else ''} and is billed at least "
                         f"{MIN_BILLED_SECONDS} s, {money(per_second * MIN_BILLED_SECONDS)}",
                         hint=f"give at least --max-cost {math.ceil(per_second * MIN_BILLED_SECONDS * 100) / 100:.2f}")
    own = spec.max_runtime_seconds
    limit, by = (own, "--max-runtime") if own is not None and own <= allows else (allows, "--max-cost")
    labels = dict(spec.labels)
    labels[BUDGET_LABEL] = budget_label(budget)
    return (spec.replace(max_runtime_seconds=limit, labels=tuple(labels.items())),
            Budget(budget, allows, limit, by, rate.derived))


def estimate_lines(spec: Any, *, catalog: str = "vertex", parallel: int = 1, total: int = 1,
                   per: str = "", budget: Budget | None = None) -> list[str]:
    """What the job will cost, as lines for stderr: the rate of each pool, the whole job's rate and, with a time
    limit, its maximum; `parallel`/`total` jobs at once/in all (tuning trials, backends; `per` names them). A derived
    price says so with its rule and Compute Engine price; an unknown one says why on the `rate:` line."""
    rate = job_rate(spec, catalog=catalog)
    kind = "spot" if rate.spot else "on-demand"
    lines = [f"cost estimate ({prices.CATALOGS[catalog]}, {spec.region}, {kind} prices):"]
    for pool in rate.pools:
        parts = " + ".join(part_text(part) for part in pool.rate.details)
        each = money(pool.rate.usd) if pool.rate.usd is not None else "unknown"
        total_pool = money(pool.usd) if pool.usd is not None else "unknown"
        lines.append(f"  {pool.role}: {pool.replicas} x ({parts}) = {pool.replicas} x {each}/h = {total_pool}/h")
    if rate.usd is None:
        lines.append(f"  rate: unknown — no price for {rate.why_unknown()} (in {spec.region}; never guessed; "
                     "tools/refresh_prices.py refreshes the table)")
    else:
        many = f" x {parallel} {per} at once = {money(rate.usd * parallel)}/h" if parallel > 1 else ""
        lines.append(f"  rate: {money(rate.usd)}/h{many}" + (" (includes derived prices)" if rate.derived else ""))
        if spec.max_runtime_seconds is not None:
            limit = spec.max_runtime_seconds
            most = rate.usd * limit / 3600 * total
            times = f" x {total} {per}" if total > 1 else ""
            lines.append(f"  at most: {money(most)} ({seconds(limit)} time limit{times})")
        lines.append("  prices: " + prices.sources_of(rate.sources))
    if budget is not None:
        said = (f"  budget: --max-cost {budget.usd:g} USD allows {seconds(budget.allows_seconds)}; time limit "
                f"{seconds(budget.timeout_seconds)}")
        said += (" (--max-runtime is the smaller: it wins" if budget.limited_by == "--max-runtime"
                 else " (set by --max-cost")
        lines.append(said + ("; the rate includes derived prices)" if budget.derived else ")"))
    if rate.spot:
        lines.append(f"  note: {SPOT_NOTE}")
    return lines


def part_text(part: prices.Part) -> str:
    """'n1-standard-16 $0.8740 (derived: 1.15 x Compute Engine $0.76)', 'n1-standard-4 $0.2185' or '… unknown'."""
    if not isinstance(part.unit, prices.Price):
        return f"{part.what} unknown"
    text = f"{part.what} {money(part.usd)}"  # type: ignore[arg-type]
    if part.unit.base is not None:
        rule = prices.RULES[part.unit.source]
        each = " each" if part.count > 1 else ""
        text += f" (derived: {rule.factor:g} x Compute Engine {prices.exact(part.unit.base.usd)}{each})"
    return text


def spent(status: Any, ran: int | None) -> dict[str, Any]:
    """A job's estimated cost so far, from its own resource (a targets JobStatus): `ran` seconds of wall time (start
    to end, or to now; None: not started) x the rate of its pools (machine types, counts, accelerators, spot or not,
    region). Legacy AI Platform's `consumedMLUnits` is passed on.

    Returns: {"usd": float|None, "usd_per_hour": float|None, "seconds": int|None, "spot": bool, "missing": [...],
              "budget_usd": float|None, "consumed_ml_units": value or None}
    """
    spot = _strategy(status.resource) == "SPOT"
    rows = [(p.role, p.replicas, p.machine, p.accelerator, p.accelerator_count) for p in status.pools]
    rate = pools_rate(rows, status.region, spot=spot) if rows and status.region else None
    usd = rate.usd if rate else None
    return {"usd": None if usd is None or ran is None else round(usd * ran / 3600, 6), "usd_per_hour": usd,
            "seconds": ran, "spot": spot, "missing": rate.missing if rate else ["the job's machines"],
            "budget_usd": budget_of(status.labels), "time_limit_seconds": _time_limit(status.resource),
            "consumed_ml_units": status.consumed.get("consumedMLUnits")}


def _time_limit(resource: dict[str, Any]) -> int | None:
    spec = resource.get("jobSpec") or resource.get("trialJobSpec") or resource.get("trainingInput") or {}
    scheduling = spec.get("scheduling") or {}
    text = scheduling.get("timeout") or scheduling.get("maxRunningTime") or ""
    match = re.fullmatch(r"([0-9]+)(\.[0-9]*)?s", str(text))
    return int(match.group(1)) if match else None


def _strategy(resource: dict[str, Any]) -> str | None:
    spec = resource.get("jobSpec") or resource.get("trialJobSpec") or {}
    return (spec.get("scheduling") or {}).get("strategy")


def spent_text(cost: dict[str, Any]) -> str:
    """One line for `jobs describe`/`jobs list`: '$0.0123 so far (0m34s x $1.3000/h, spot)' or why unknown."""
    if cost["usd"] is None:
        said = "unknown" if cost["seconds"] is not None else "not started"
        if cost["seconds"] is not None and cost["missing"]:
            said += f" (no price for {', '.join(cost['missing'])})"
    else:
        said = (f"{money(cost['usd'])} (estimated: {seconds(cost['seconds'])} x {money(cost['usd_per_hour'])}/h"
                f"{', spot' if cost['spot'] else ''})")
    if cost.get("budget_usd") is not None:
        limit = cost.get("time_limit_seconds")
        said += f"; budget {money(cost['budget_usd'])}" + (f" (time limit {seconds(limit)})" if limit else "")
    if cost.get("consumed_ml_units") is not None:
        said += f"; consumedMLUnits {cost['consumed_ml_units']}"
    return said
