"""The one price table: what an hour of a machine or an accelerator costs, per region, on Vertex AI custom
training (`catalog="vertex"`) and on Compute Engine (`catalog="compute"`, the nodes of a GKE cluster), on demand and
on spot capacity.

Every price carries its source and the date of the copy it was read from (SOURCES). A combination without a price
here is UNKNOWN, never guessed: no price is derived from another region, machine size or service. The table is
shipped and works offline; a maintainer refreshes it from the Cloud Billing Catalog API with
`tools/refresh_prices.py` (its SKUs are the machine-readable source of Google's price pages).

Pure data plus small lookups; importing this module costs nothing measurable.

Example:
    >>> hourly("n1-standard-4", None, 0, "us-central1").usd
    0.21849885
    >>> hourly("n1-standard-16", "NVIDIA_TESLA_T4", 4, "us-central1").known
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
class Price:
    """USD per hour of one machine, or of ONE accelerator, and the key of its source in SOURCES."""

    usd: float
    source: str

    def __post_init__(self) -> None:
        if not (math.isfinite(self.usd) and self.usd > 0) or self.source not in SOURCES:
            raise ValueError(f"a price needs a positive USD amount and a known source: {self!r}")


@dataclass(frozen=True)
class Rate:
    """The hourly cost of one replica (machine + its accelerators), or what is unknown about it.

    Attributes:
        usd: USD per hour; None when any part has no price.
        parts: (what, USD per hour or None) per part, e.g. ("n1-standard-16", 0.76), ("4 x NVIDIA_TESLA_T4", 1.4).
        sources: the SOURCES keys the known parts came from.
    """

    usd: float | None
    parts: tuple[tuple[str, float | None], ...]
    sources: tuple[str, ...] = field(default=())

    @property
    def known(self) -> bool:
        return self.usd is not None

    @property
    def missing(self) -> tuple[str, ...]:
        return tuple(what for what, usd in self.parts if usd is None)


# ---- the table ---------------------------------------------------------------------------------------------------
# (catalog, "machine" | "accelerator", name, region, spot) -> Price. Only what a source states (prices_data).


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
        return table
    SOURCES["billing-catalog"] = Source(SOURCES["billing-catalog"].where, FETCHED)
    table.update({key: Price(usd, "billing-catalog") for key, usd in BILLING.items()})
    return table


TABLE: dict[tuple[str, str, str, str, bool], Price] = _build()


def price(catalog: str, kind: str, name: str, region: str, spot: bool = False) -> Price | None:
    """The table's price of one machine or ONE accelerator, or None: unknown (never estimated from another)."""
    if catalog not in CATALOGS:
        raise ValueError(f"catalog must be one of {', '.join(CATALOGS)}: {catalog!r}")
    return TABLE.get((catalog, kind, name, region, bool(spot)))


def hourly(machine: str, accelerator: str | None, count: int, region: str, *, catalog: str = "vertex",
           spot: bool = False) -> Rate:
    """USD per hour of ONE replica: `machine` with `count` x `accelerator`, in `region`.

    A legacy machine type is priced as its Compute Engine equivalent plus the GPUs it carries (legacy AI Platform
    charged what Vertex AI charges for the same resources). Any part without a price makes the rate unknown; the
    Rate says which (`missing`).

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
    label = machine + (" (spot)" if spot else "")
    machine_price = price(catalog, "machine", machine, region, spot)
    parts: list[tuple[str, float | None]] = [(label, machine_price.usd if machine_price else None)]
    sources = [machine_price.source] if machine_price else []
    if accelerator and count:
        unit = price(catalog, "accelerator", accelerator, region, spot)
        parts.append((f"{count} x {accelerator}" + (" (spot)" if spot else ""),
                      round(count * unit.usd, 10) if unit else None))
        if unit:
            sources.append(unit.source)
    usd = None if any(p is None for _, p in parts) else round(sum(p for _, p in parts), 10)  # type: ignore[misc]
    return Rate(usd, tuple(parts), tuple(dict.fromkeys(sources)))


def coverage(catalog: str, spot: bool = False) -> dict[str, dict[str, bool]]:
    """{region: {machine or accelerator name: has a price}} over everything the machine table knows."""
    names = [("machine", m) for m, t in machines.MACHINES.items() if not t.is_legacy]
    names += [("accelerator", a) for a in machines.ACCELERATORS]
    return {region: {name: price(catalog, kind, name, region, spot) is not None for kind, name in names}
            for region in machines.REGIONS}


def sources_of(keys: tuple[str, ...]) -> str:
    """'where (as of DATE); …' for the SOURCES keys given."""
    return "; ".join(f"{SOURCES[k].where} (as of {SOURCES[k].as_of})" for k in keys)
