"""Refresh mlsubmit's price table from the Cloud Billing Catalog API (a maintainer's tool, never run by mlsubmit).

    python tools/refresh_prices.py                    # with Application Default Credentials (gcloud auth ...)
    python tools/refresh_prices.py --key API_KEY      # or an API key with the Cloud Billing API enabled

It lists the SKUs of Vertex AI (service C7E2-9256-1C43) and Compute Engine (6F81-5844-456A) with
google-api-python-client (its shipped cloudbilling v1 discovery document), keeps the on-demand and spot prices
of what mlsubmit's machine table knows (n1 cores and memory, the GPUs) in its regions, and writes
mlsubmit/jobspec/prices_billing.py, which mlsubmit.jobspec.prices reads beside its own table (offline: the file is
shipped, the API is never called by mlsubmit). An n1 machine's price is built the way Google bills it: vCPUs x the
core SKU + GiB x the RAM SKU (n1-standard: 3.75 GiB per vCPU, n1-highmem: 6.5, n1-highcpu: 0.9). A SKU that is
not understood is skipped, never guessed at; `--explain` lists every SKU skipped and why (malformed ones, and two
SKUs that price the same thing differently, are listed always).
"""

from __future__ import annotations

import argparse
import datetime
import pprint
import re
import sys
from pathlib import Path
from typing import Any, Iterable

ROOT = Path(__file__).resolve().parents[1]
SERVICES = {"vertex": "C7E2-9256-1C43", "compute": "6F81-5844-456A"}
N1_GIB_PER_VCPU = {"standard": 3.75, "highmem": 6.5, "highcpu": 0.9}
# description fragment (lower case) -> accelerator; longer fragments first so "a100 80gb" is not read as "a100"
GPU_NAMES = (("h200", "NVIDIA_H200_141GB"), ("gb200", "NVIDIA_GB200"), ("b200", "NVIDIA_B200"),
             ("rtx pro 6000", "NVIDIA_RTX_PRO_6000"), ("h100 80gb mega", "NVIDIA_H100_MEGA_80GB"), ("h100 mega", "NVIDIA_H100_MEGA_80GB"),
             ("h100 80gb", "NVIDIA_H100_80GB"), ("h100", "NVIDIA_H100_80GB"),
             ("a100 80gb", "NVIDIA_A100_80GB"), ("tesla a100", "NVIDIA_TESLA_A100"), ("a100", "NVIDIA_TESLA_A100"),
             ("tesla v100", "NVIDIA_TESLA_V100"), ("tesla p100", "NVIDIA_TESLA_P100"), ("tesla p4 ", "NVIDIA_TESLA_P4"),
             ("tesla t4", "NVIDIA_TESLA_T4"), ("tesla k80", "NVIDIA_TESLA_K80"), ("nvidia l4", "NVIDIA_L4"))
_SKIPPED = re.compile(r"commitment|sole tenan|reserved|reservation|dws|flex|calendar|premium|custom|extended|"
                      r"prediction|predict|online|batch|workbench|notebook|pipelines? run|tpu", re.I)
_CORE = re.compile(r"\bN1 Predefined Instance Core\b", re.I)
_RAM = re.compile(r"\bN1 Predefined Instance Ram\b", re.I)


def usd_per_hour(sku: dict[str, Any]) -> float | None:
    """The SKU's first on-demand tier as USD per hour (usageUnit h or GiBy.h), or None."""
    for info in sku.get("pricingInfo") or ():
        expression = info.get("pricingExpression") or {}
        if expression.get("usageUnit") not in ("h", "GiBy.h"):
            continue
        rates = sorted(expression.get("tieredRates") or (), key=lambda r: float(r.get("startUsageAmount") or 0))
        paid = [r["unitPrice"] for r in rates if int(r["unitPrice"].get("units") or 0) or
                int(r["unitPrice"].get("nanos") or 0)]
        if not paid:
            continue
        price = paid[0]  # a free first tier (a few SKUs have one) is not the price
        if price.get("currencyCode", "USD") != "USD":
            return None
        return int(price.get("units") or 0) + int(price.get("nanos") or 0) / 1e9
    return None


def classify(sku: dict[str, Any]) -> tuple[str, str, bool] | None:
    """(kind, name, spot) of a SKU mlsubmit prices: ("core"|"ram", "n1", spot) or ("accelerator", NAME, spot)."""
    description = sku.get("description") or ""
    category = sku.get("category") or {}
    usage = category.get("usageType", "")
    if usage not in ("OnDemand", "Preemptible") or _SKIPPED.search(description):
        return None
    spot = usage == "Preemptible" or "spot" in description.lower() or "preemptible" in description.lower()
    if _CORE.search(description):
        return "core", "n1", spot
    if _RAM.search(description):
        return "ram", "n1", spot
    lowered = description.lower() + " "
    if "gpu" in lowered:
        for fragment, name in GPU_NAMES:
            if fragment in lowered:
                return "accelerator", name, spot
    return None


def why_not(sku: dict[str, Any]) -> str:
    """Why `classify` gives None for this SKU, in words."""
    usage = (sku.get("category") or {}).get("usageType", "")
    if usage not in ("OnDemand", "Preemptible"):
        return f"usage type {usage or 'missing'} (only on-demand and spot prices are kept)"
    found = _SKIPPED.search(sku.get("description") or "")
    if found:
        return f"a {found.group(0).lower()} SKU (commitments, reservations, DWS, TPUs and prediction are not priced)"
    return "not an n1 core, n1 RAM or GPU SKU (what mlsubmit prices)"


def _regions(value: Any) -> list[str]:
    """serviceRegions as a list: the API gives a list; a single region given as a string is that region (never its
    letters)."""
    if isinstance(value, str):
        return [value]
    if value is None:
        return []
    if not isinstance(value, (list, tuple)) or not all(isinstance(region, str) for region in value):
        raise TypeError(f"serviceRegions is {str(value)[:60]!r}, not a list of regions")
    return list(value)


def parse(skus: Iterable[dict[str, Any]], catalog: str, regions: Iterable[str],
          n1_machines: dict[str, int]) -> tuple[dict[tuple, float], list[str]]:
    """{(catalog, kind, name, region, spot): USD per hour} for machines (n1, from core + RAM) and accelerators, and
    one line per SKU that was skipped, `DESCRIPTION: why` (MALFORMED … for one not of the API's shape, CONFLICT …
    for two that price the same thing differently: neither is kept)."""
    wanted = set(regions)
    parts: dict[tuple, tuple[float, str]] = {}  # (kind, name, region, spot) -> (USD, the SKU that gave it)
    conflicting: set[tuple] = set()
    skipped: list[str] = []
    for sku in skus:
        try:
            if not isinstance(sku, dict):
                raise TypeError(f"a {type(sku).__name__}, not an object")
            kind = classify(sku)
            usd = usd_per_hour(sku)
            regions_of = _regions(sku.get("serviceRegions"))
        except (KeyError, TypeError, ValueError, AttributeError) as err:  # not the API's shape: named, never guessed
            what = sku.get("description") or sku.get("name") if isinstance(sku, dict) else None
            skipped.append(f"MALFORMED {str(what or repr(sku))[:80]} ({type(err).__name__}: {err})")
            continue
        description = str(sku.get("description", "?"))
        if kind is None or usd is None:
            skipped.append(f"{description}: {why_not(sku) if kind is None else 'no hourly USD price'}")
            continue
        if not set(regions_of) & wanted:
            skipped.append(f"{description}: in no region mlsubmit prices (serviceRegions: "
                           f"{', '.join(regions_of) or 'none'})")
            continue
        for region in sorted(set(regions_of) & wanted):
            key = (kind[0], kind[1], region, kind[2])
            if key in parts and parts[key][0] != usd:  # two SKUs disagree: keep neither, never pick one
                other, first = parts[key]
                what = f"{kind[1]} {kind[0]}{' spot' if kind[2] else ''} in {region}"
                skipped.append(f"CONFLICT {description}: ${usd:g}/h for {what}, but {first} says ${other:g}/h; "
                               "neither is kept")
                conflicting.add(key)
            else:
                parts.setdefault(key, (usd, description))
    usable = {key: usd for key, (usd, _) in parts.items() if key not in conflicting}
    table: dict[tuple, float] = {}
    for (kind, name, region, spot), usd in usable.items():
        if kind == "accelerator":
            table[(catalog, "accelerator", name, region, spot)] = round(usd, 9)
    for machine, vcpus in n1_machines.items():
        size = machine.split("-")[1]
        for region in wanted:
            for spot in (False, True):
                core, ram = usable.get(("core", "n1", region, spot)), usable.get(("ram", "n1", region, spot))
                if core is None or ram is None:
                    continue
                table[(catalog, "machine", machine, region, spot)] = round(
                    vcpus * core + vcpus * N1_GIB_PER_VCPU[size] * ram, 9)
    return table, skipped


def list_skus(client: Any, service: str) -> Iterable[dict[str, Any]]:
    """Every SKU of a service, page by page (services.skus.list)."""
    request = client.services().skus().list(parent=f"services/{service}", currencyCode="USD", pageSize=5000)
    while request is not None:
        answer = request.execute()
        if not isinstance(answer, dict) or not isinstance(answer.get("skus") or [], list):
            raise Refused(f"the Cloud Billing API answered services/{service}/skus with something that is not a "
                          f"SKU list ({str(answer)[:80]!r})", "check the API's answer; nothing was written")
        yield from answer.get("skus") or ()
        request = client.services().skus().list_next(request, answer)


class Refused(Exception):
    """One line for the maintainer: what went wrong and what to do; exit code 2 (usage) or 1 (the API)."""

    def __init__(self, message: str, hint: str, code: int = 1):
        super().__init__(message)
        self.message, self.hint, self.code = message, hint, code


def _api_error(err: Exception) -> Refused:
    """A failure of the API call in one line: credentials, a refused key, an HTTP error, no network."""
    name = type(err).__name__
    if name == "DefaultCredentialsError":
        return Refused("no credentials for the Cloud Billing API", "run `gcloud auth application-default login`, "
                       "or pass --key API_KEY", code=2)
    if name == "HttpError":
        import json

        try:
            error = json.loads(err.content.decode("utf-8")).get("error") or {}  # type: ignore[attr-defined]
            said = f"{error.get('code', err.resp.status)} {error.get('status', '')}: {error.get('message', '')}"  # type: ignore[attr-defined]
        except (ValueError, AttributeError, UnicodeDecodeError):
            said = f"{getattr(getattr(err, 'resp', None), 'status', '?')}"
        first = " ".join(said.split())[:300]
        return Refused(f"the Cloud Billing API refused the request ({first})",
                       "check --key (an API key with the Cloud Billing API enabled) or the credentials' project",
                       code=2 if " 400 " in f" {first} " or first.startswith(("400", "401", "403")) else 1)
    return Refused(f"cannot reach the Cloud Billing API ({name}: {str(err).splitlines()[0][:200] if str(err) else ''})",
                   "check the network; nothing was written")


def module_text(table: dict[tuple, float], fetched: str) -> str:
    return (f'"""Prices from the Cloud Billing Catalog API, written by tools/refresh_prices.py on {fetched}; read by '
            f'mlsubmit.jobspec.prices."""\n\nFETCHED = {fetched!r}\nBILLING = {pprint.pformat(dict(sorted(table.items())), width=116)}\n')


def main(argv: list[str] | None = None, client: Any = None) -> int:
    """Fetch, parse and write; every failure is one line on stderr (`error: …; hint`), and the table is written only
    when prices were understood (an answer with none never empties it). Exit 0, 1 (the API) or 2 (usage)."""
    try:
        return _main(argv, client)
    except Refused as err:
        print(f"error: {err.message}; {err.hint}", file=sys.stderr)
        return err.code


def _main(argv: list[str] | None, client: Any) -> int:
    sys.path.insert(0, str(ROOT))
    from mlsubmit.jobspec import machines

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--key", help="an API key (else Application Default Credentials)")
    parser.add_argument("--output", default=str(ROOT / "mlsubmit" / "jobspec" / "prices_billing.py"))
    parser.add_argument("--explain", action="store_true", help="list every SKU that was skipped, and why")
    args = parser.parse_args(argv)
    output = Path(args.output)
    if output.is_dir() or not output.parent.is_dir():
        raise Refused(f"invalid value for --output: received {args.output!r}; expected a file in an existing folder",
                      "e.g. --output mlsubmit/jobspec/prices_billing.py", code=2)
    n1 = {name: m.vcpus for name, m in machines.MACHINES.items() if m.family == "n1"}
    table: dict[tuple, float] = {}
    try:
        if client is None:
            from googleapiclient.discovery import build

            client = build("cloudbilling", "v1", static_discovery=True, developerKey=args.key)
        for catalog, service in SERVICES.items():
            found, skipped = parse(list_skus(client, service), catalog, machines.REGIONS, n1)
            table.update(found)
            odd = [s for s in skipped if s.startswith(("MALFORMED ", "CONFLICT "))]  # always listed: data to look at
            conflicts = sum(s.startswith("CONFLICT ") for s in skipped)
            print(f"{catalog}: {len(found)} prices, {len(skipped)} SKUs skipped ({len(odd) - conflicts} malformed, "
                  f"{conflicts} conflicting){'' if args.explain else '; --explain lists every one and why'}",
                  file=sys.stderr)
            for line in (skipped if args.explain else odd):
                print(f"  skipped: {line}", file=sys.stderr)
    except Refused:
        raise
    except Exception as err:  # noqa: BLE001 - whatever the client or the transport raised: one line, named
        raise _api_error(err) from None
    if not table:
        raise Refused(f"no price was understood in the API's answer; {output} was not changed",
                      "run with --explain to see every SKU that was skipped")
    fetched = datetime.date.today().isoformat()
    tmp = output.with_name(f".{output.name}.tmp")
    try:
        tmp.write_text(module_text(table, fetched), encoding="utf-8")
        tmp.replace(output)  # complete or not at all
    except OSError as err:
        tmp.unlink(missing_ok=True)
        raise Refused(f"cannot write {output} ({err.strerror or err})", "check the path and its permissions",
                      code=2) from None
    print(f"wrote {len(table)} prices to {output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
