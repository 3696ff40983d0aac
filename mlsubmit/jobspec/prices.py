"""The one price table: what an hour of a machine or an accelerator costs, per region, on Vertex AI custom
training (`catalog="vertex"`) and on Compute Engine (`catalog="compute"`, the nodes of a GKE cluster), on demand and
on spot capacity.

Every price carries its source and the date of the copy it was read from (SOURCES). A stated price (TABLE) is what a
source says; it always wins. Where no source states a Vertex AI price, one is DERIVED from Compute Engine's by the one
rule the facts support (RULES: Vertex AI = 1.15 x Compute Engine, exact for the two pairs known, for n1 machines and
the GPUs they carry, on demand only; prices_data says why it stops there). A derived price says so, with its rule and
its Compute Engine price. Anything else is Unknown, with the reason (which source lacks it, or why a row was not
taken); nothing is scaled from another region or machine size. The table is shipped and works offline; a maintainer
refreshes it from the Cloud Billing Catalog API with `tools/refresh_prices.py` (its SKUs are the machine-readable
source of Google's price pages).

Pure data plus small lookups; importing this module costs nothing measurable.

Example:
    >>> hourly("n1-standard-4", None, 0, "us-central1").usd
    0.21849885
    >>> rate = hourly("n1-standard-16", "NVIDIA_TESLA_T4", 4, "us-central1")
    >>> rate.usd, rate.derived  # 1.15 x (0.76 + 4 x 0.35)
    (2.484, True)
    >>> hourly("n1-standard-16", "NVIDIA_TESLA_T4", 4, "us-central1", spot=True).known
    False
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from mlsubmit.jobspec import machines, prices_data

CATALOGS = {"vertex": "Vertex AI custom training", "compute": "Compute Engine (GKE nodes)"}


@dataclass(frozen=True)
class Source:
    """Where prices were read, and the date of that copy."""

    where: str
    as_of: str


# Provenance in full: "vertex-page" is Google's page (custom-trained models, Iowa us-central1, no savings plan) as
# quoted verbatim in api-evangelist/google-vertex-ai plans/google-vertex-ai-plans-pricing.yml @342263c3 (page read
# 2026-10-07); a second copy of the n1-standard-4 figure was checked 2026-09-06. "skypilot-v8" is
# skypilot-org/skypilot-catalog catalogs/v8/gcp/vms.csv at commit 006059e0f18a (built by SkyPilot from the Cloud
# Billing Catalog API; columns Price and SpotPrice; the commit carries no date, read 2026-11-25). The rows themselves
# live in mlsubmit/jobspec/prices_data.py, which says what each source left unknown.
SOURCES = {
    "vertex-page": Source("cloud.google.com/vertex-ai/pricing (custom training)", "2026-10-07"),
    "skypilot-v8": Source("Compute Engine prices in SkyPilot's catalog v8 (gcp/vms.csv @006059e0)", "2026-11-25"),
    "billing-catalog": Source("Cloud Billing Catalog API SKUs (tools/refresh_prices.py)", "see the SKU"),
}


@dataclass(frozen=True)
class Rule:
    """How a Vertex AI price is derived from Compute Engine's where no source states it, and the evidence for it."""

    factor: float
    scope: str
    evidence: tuple[tuple[str, str, float, float, str], ...]  # (name, region, Vertex AI, Compute Engine, where read)

    def describe(self) -> str:
        pairs = " and ".join(f"{name} {exact(vertex)} = {self.factor:g} x {exact(compute)} ({region})"
                             for name, region, vertex, compute, _ in self.evidence)
        return f"derived: Vertex AI = {self.factor:g} x Compute Engine, {self.scope}; evidence: {pairs}"


def exact(usd: float) -> str:
    """'$0.21849885', '$0.76': every digit the source gave, none added."""
    return "$" + f"{usd:.10f}".rstrip("0").rstrip(".")


# Spot is left out on purpose: every pair is on demand, and no source gives a Vertex AI spot price to test it on.
VERTEX_RULE = "derived-1.15"
RULES = {
    VERTEX_RULE: Rule(prices_data.VERTEX_FACTOR, "on demand, for n1 machines and the GPUs they carry",
                         prices_data.VERTEX_EVIDENCE),
}


@dataclass(frozen=True)
class Price:
    """USD per hour of one machine, or of ONE accelerator, and the key of its source in SOURCES.

    A derived price has a rule (its `source` is a key of RULES) and `base`, the Compute Engine price it came from.
    """

    usd: float
    source: str
    base: Price | None = None

    known = True

    def __post_init__(self) -> None:
        stated = self.source in SOURCES and self.base is None
        derived = self.source in RULES and self.base is not None
        if not (math.isfinite(self.usd) and self.usd > 0) or not (stated or derived):
            raise ValueError(f"a price needs a positive USD amount and a known source: {self!r}")

    @property
    def derived(self) -> bool:
        return self.base is not None


@dataclass(frozen=True)
class Unknown:
    """No price: `reason` says which source lacks it, or why its row was not taken."""

    reason: str

    known = False


@dataclass(frozen=True)
class Part:
    """One part of a replica: its machine (count 1) or its `count` accelerators, priced by `unit` or Unknown."""

    what: str
    count: int
    unit: Price | Unknown

    @property
    def usd(self) -> float | None:
        return round(self.count * self.unit.usd, 10) if isinstance(self.unit, Price) else None


@dataclass(frozen=True)
class Rate:
    """The hourly cost of one replica (machine + its accelerators), or what is unknown about it.

    Attributes:
        usd: USD per hour; None when any part has no price.
        parts: (what, USD per hour or None) per part, e.g. ("n1-standard-16", 0.76), ("4 x NVIDIA_TESLA_T4", 1.4).
        sources: the SOURCES and RULES keys the known parts came from.
        details: the parts with their unit prices (stated or derived) or why they are unknown.
    """

    usd: float | None
    parts: tuple[tuple[str, float | None], ...]
    sources: tuple[str, ...] = field(default=())
    details: tuple[Part, ...] = field(default=())

    @property
    def known(self) -> bool:
        return self.usd is not None

    @property
    def missing(self) -> tuple[str, ...]:
        return tuple(what for what, usd in self.parts if usd is None)

    @property
    def derived(self) -> bool:
        """Whether any part's price is derived (RULES) rather than stated by a source."""
        return any(isinstance(p.unit, Price) and p.unit.derived for p in self.details)

    @property
    def reasons(self) -> dict[str, str]:
        """{what: why it has no price} for the unknown parts."""
        return {p.what: p.unit.reason for p in self.details if isinstance(p.unit, Unknown)}


# ---- the table ---------------------------------------------------------------------------------------------------
# (catalog, "machine" | "accelerator", name, region, spot) -> Price. Only what a source states (prices_data), and only
# for the machines, accelerators and regions of the machine table.


def _build() -> dict[tuple[str, str, str, str, bool], Price]:
    table: dict[tuple[str, str, str, str, bool], Price] = {}
    for kind, rows in (("machine", prices_data.VERTEX_MACHINES_ON_DEMAND),
                       ("accelerator", prices_data.VERTEX_ACCELERATORS_ON_DEMAND)):
        for name, regions in rows.items():
            for region, usd in regions.items():
                table[("vertex", kind, name, region, False)] = Price(usd, "vertex-page")
    for kind, compute_rows in (("machine", prices_data.COMPUTE_MACHINES),
                               ("accelerator", prices_data.COMPUTE_ACCELERATORS)):
        for name, by_region in compute_rows.items():
            for region, (on_demand, spot) in by_region.items():
                table[("compute", kind, name, region, False)] = Price(on_demand, "skypilot-v8")
                table[("compute", kind, name, region, True)] = Price(spot, "skypilot-v8")
    try:  # written by tools/refresh_prices.py from the Cloud Billing Catalog API: newer than the pages above
        from mlsubmit.jobspec.prices_billing import BILLING, FETCHED
    except ImportError:
        pass
    else:
        SOURCES["billing-catalog"] = Source(SOURCES["billing-catalog"].where, FETCHED)
        table.update({key: Price(usd, "billing-catalog") for key, usd in BILLING.items()})
    known = {"machine": machines.MACHINES, "accelerator": machines.ACCELERATORS}
    return {key: found for key, found in table.items() if key[2] in known[key[1]] and key[3] in machines.REGIONS}


TABLE: dict[tuple[str, str, str, str, bool], Price] = _build()
_VERTEX_STATED = {name: sorted(r for (c, _, n, r, spot) in TABLE if c == "vertex" and n == name and not spot)
                  for (_, _, name, _, _) in TABLE}


def price(catalog: str, kind: str, name: str, region: str, spot: bool = False) -> Price | None:
    """The price a source states for one machine or ONE accelerator, or None (see `quote` for derived ones)."""
    if catalog not in CATALOGS:
        raise ValueError(f"catalog must be one of {', '.join(CATALOGS)}: {catalog!r}")
    return TABLE.get((catalog, kind, name, region, bool(spot)))


def quote(catalog: str, kind: str, name: str, region: str, spot: bool = False) -> Price | Unknown:
    """The price of one machine or ONE accelerator: stated, else derived (Vertex AI, RULES), else Unknown and why.

    Example:
        >>> quote("vertex", "machine", "n1-standard-16", "us-central1")  # 1.15 x Compute Engine's $0.76
        Price(usd=0.874, source='derived-1.15', base=Price(usd=0.76, source='skypilot-v8', base=None))
    """
    stated = price(catalog, kind, name, region, spot)
    if stated is not None:
        return stated
    absent = _not_offered(kind, name, region)
    if absent:
        return Unknown(absent)
    if catalog == "compute":
        return Unknown(_compute_why(kind, name, region, spot))
    if spot:
        return Unknown(prices_data.VERTEX_SPOT)
    if not _derivable(kind, name):
        why = prices_data.VERTEX_TPU if _is_tpu(kind, name) else prices_data.VERTEX_AGAINST
        return Unknown(f"{_vertex_lacks(name)}, and {why}")
    base = price("compute", kind, name, region)
    if base is None:
        return Unknown(f"{_vertex_lacks(name)}, and Compute Engine's, to derive it from, is unknown: "
                       f"{_compute_why(kind, name, region, False)}")
    return Price(round(RULES[VERTEX_RULE].factor * base.usd, 10), VERTEX_RULE, base)


def _derivable(kind: str, name: str) -> bool:
    """Whether the 1.15 rule covers it: an n1 machine, or a GPU that n1 machines carry."""
    if kind == "machine":
        found = machines.MACHINES.get(name)
        return found is not None and found.family == "n1"
    return any(name in m.accelerators for m in machines.MACHINES.values() if m.family == "n1")


def _is_tpu(kind: str, name: str) -> bool:
    if kind == "accelerator":
        found = machines.ACCELERATORS.get(name)
        return found is not None and found.kind == "tpu"
    carried = machines.MACHINES[name].accelerators if name in machines.MACHINES else {}
    return name == machines.TPU_MACHINE or any(_is_tpu("accelerator", a) for a in carried)


def _not_offered(kind: str, name: str, region: str) -> str:
    """Why the machine table offers `name` nowhere in `region` (an accelerator, or the one a fixed machine carries)."""
    found = machines.MACHINES.get(name) if kind == "machine" else None
    carried = found.implicit[0] if found is not None and found.implicit else None
    accelerator = machines.ACCELERATORS.get(name if kind == "accelerator" else carried or "")
    if accelerator is None or region in accelerator.regions:
        return ""
    where = f"is not offered in {region} (machine table: {', '.join(accelerator.regions)})"
    return f"{name} carries {carried}, which {where}" if carried else f"{name} {where}"


def _vertex_lacks(name: str) -> str:
    stated = _VERTEX_STATED.get(name)
    return "no source gives its Vertex AI price" + (f" (only for {', '.join(stated)})" if stated else "")


def _compute_why(kind: str, name: str, region: str, spot: bool) -> str:
    source = SOURCES["skypilot-v8"].where.replace("Compute Engine prices in ", "")
    if _is_tpu(kind, name):
        return f"not taken from {source}: {prices_data.TPU_NOT_COMPUTE}"
    if name in prices_data.COMPUTE_NOT_TAKEN:
        return f"not taken from {source}: {prices_data.COMPUTE_NOT_TAKEN[name]}"
    rows = prices_data.COMPUTE_MACHINES if kind == "machine" else prices_data.COMPUTE_ACCELERATORS
    if name not in rows:
        return f"{source} has no {name} rows"
    return f"{source} has no {name} row for {region}" + (" (spot)" if spot else "")


def hourly(machine: str, accelerator: str | None, count: int, region: str, *, catalog: str = "vertex",
           spot: bool = False) -> Rate:
    """USD per hour of ONE replica: `machine` with `count` x `accelerator`, in `region`.

    A legacy machine type is priced as its Compute Engine equivalent plus the GPUs it carries (legacy AI Platform
    charged what Vertex AI charges for the same resources). Each part is stated, derived (`Rate.derived`) or unknown;
    any unknown part makes the rate unknown, and the Rate says which (`missing`) and why (`reasons`).

    Example (the kubernetes target prices a node):
        >>> hourly("n1-standard-4", None, 0, "us-central1", catalog="compute", spot=True).usd
        0.05223
    """
    found = machines.MACHINES.get(machine)
    if found is not None and found.is_legacy:
        implicit = found.implicit
        machine = found.equivalent or machine
        if implicit and not accelerator:
            accelerator, count = implicit
    suffix = " (spot)" if spot else ""
    details = [Part(machine + suffix, 1, quote(catalog, "machine", machine, region, spot))]
    if accelerator and count:
        details.append(Part(f"{count} x {accelerator}{suffix}", count,
                            quote(catalog, "accelerator", accelerator, region, spot)))
    parts = tuple((p.what, p.usd) for p in details)
    usd = None if any(p is None for _, p in parts) else round(sum(p for _, p in parts), 10)  # type: ignore[misc]
    sources = [key for p in details if isinstance(p.unit, Price)
               for key in ((p.unit.base.source, p.unit.source) if p.unit.base else (p.unit.source,))]
    return Rate(usd, parts, tuple(dict.fromkeys(sources)), tuple(details))


def coverage(catalog: str, spot: bool = False) -> dict[str, dict[str, Price | Unknown]]:
    """{region: {machine or accelerator name: its Price (stated or derived) or Unknown, with the reason}} over
    everything the machine table knows; each value has `known`, and an Unknown has its `reason`.
    """
    names = [("machine", m) for m, t in machines.MACHINES.items() if not t.is_legacy]
    names += [("accelerator", a) for a in machines.ACCELERATORS]
    return {region: {name: quote(catalog, kind, name, region, spot) for kind, name in names}
            for region in machines.REGIONS}


def sources_of(keys: tuple[str, ...]) -> str:
    """'where (as of DATE); …' for the SOURCES keys given, then each RULES key's rule and evidence."""
    said = [f"{SOURCES[k].where} (as of {SOURCES[k].as_of})" for k in keys if k in SOURCES]
    return "; ".join(said + [RULES[k].describe() for k in keys if k in RULES])
