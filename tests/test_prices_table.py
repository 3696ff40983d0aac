"""The price table's coverage and its one derivation rule: every machine and accelerator of the machine table, in every
region of it, on demand and spot, on both catalogs, has a price (stated by a source, or derived by the 1.15 rule) or
says why not; the rule reproduces its evidence exactly, reaches only n1 machines and the GPUs they carry, on demand,
and never beats a stated price; the headline job (`--tier CUSTOM --gpus 4`) prints a derived price through the CLI."""

from __future__ import annotations

import subprocess
import sys

import pytest

from mlsubmit.jobspec import cost, machines, prices, prices_data
from mlsubmit.jobspec.spec import JobSpec, Pool

CATALOG_SPOT = [(catalog, spot) for catalog in prices.CATALOGS for spot in (False, True)]


def _n1_gpus() -> set[str]:
    return {a for m in machines.MACHINES.values() if m.family == "n1" for a in m.accelerators}


@pytest.mark.parametrize("catalog, spot", CATALOG_SPOT)
def test_every_machine_and_accelerator_in_every_region_has_a_price_or_a_reason(catalog, spot):
    covered = prices.coverage(catalog, spot)
    names = {m for m, t in machines.MACHINES.items() if not t.is_legacy} | set(machines.ACCELERATORS)
    assert set(covered) == set(machines.REGIONS) and all(set(row) == names for row in covered.values())
    for region, row in covered.items():
        for name, found in row.items():
            if found.known:
                assert found.usd > 0 and (found.source in prices.SOURCES or found.source in prices.RULES)
            else:  # a reason that names what is missing: a source, a rule, or the machine table
                assert isinstance(found, prices.Unknown) and len(found.reason) > 20, (catalog, region, name)
                assert any(word in found.reason for word in ("source", "SkyPilot", "rule", "machine table")), \
                    found.reason


def test_the_rule_reproduces_its_evidence_exactly_and_stated_prices_win():
    rule = prices.RULES[prices.VERTEX_RULE]
    assert rule.factor == prices_data.VERTEX_FACTOR == 1.15
    for name, region, vertex, compute, where in rule.evidence:
        assert round(rule.factor * compute, 10) == vertex and where  # 1.15 x 0.189999 = 0.21849885; 1.15 x 0.35
    assert prices.price("vertex", "machine", "n1-standard-4", "us-central1").usd == 0.21849885  # stated
    assert prices.price("compute", "accelerator", machines.T4, "us-central1").usd == 0.35  # the T4 pair's base
    stated = prices.quote("vertex", "machine", "n1-standard-4", "us-central1")
    assert stated.source == "vertex-page" and not stated.derived  # not 1.15 x SkyPilot's rounded $0.19 = $0.2185
    assert prices.quote("vertex", "accelerator", machines.T4, "us-central1").usd == 0.4025  # derived = the quote
    assert prices.quote("vertex", "accelerator", machines.H100, "us-central1").usd == 9.79655057  # stated


@pytest.mark.parametrize("spot", [False, True])
def test_derived_prices_are_n1_machines_and_their_gpus_on_demand_from_the_same_regions_compute_engine_price(spot):
    derived = 0
    for region, row in prices.coverage("vertex", spot).items():
        for name, found in row.items():
            if not (found.known and found.derived):
                continue
            derived += 1
            assert not spot and (machines.MACHINES[name].family == "n1" if name in machines.MACHINES
                                 else name in _n1_gpus())
            kind = "machine" if name in machines.MACHINES else "accelerator"
            assert found.base == prices.price("compute", kind, name, region)
            assert found.usd == round(1.15 * found.base.usd, 10)
    if spot:
        assert derived == 0  # the evidence is on demand only: spot is never derived
        reasons = {f.reason for row in prices.coverage("vertex", True).values() for f in row.values()}
        assert reasons and all("spot" in why or "not offered" in why for why in reasons)
    else:  # every n1 machine in every region (SkyPilot has n1 rows for all of them), and the T4 everywhere
        assert all(prices.coverage("vertex")[r][m].known for r in machines.REGIONS
                   for m, t in machines.MACHINES.items() if t.family == "n1")
        assert all(prices.coverage("vertex")[r][machines.T4].known for r in machines.REGIONS)


def test_what_the_rule_does_not_reach_says_why():
    a2 = prices.quote("vertex", "machine", "a2-highgpu-1g", "us-central1")
    assert not a2.known and "not applied" in a2.reason and "H100" in a2.reason  # the counter-evidence
    l4 = prices.quote("vertex", "accelerator", machines.L4, "us-central1")
    assert not l4.known and "not applied" in l4.reason
    tpu = prices.quote("vertex", "accelerator", machines.TPU_V2, "us-central1")
    assert not tpu.known and "TPU" in tpu.reason
    h100 = prices.quote("vertex", "accelerator", machines.H100, "us-east4")  # stated for us-central1 only
    assert not h100.known and "only for us-central1" in h100.reason
    p4 = prices.quote("compute", "accelerator", machines.P4, "us-east1")
    assert p4.reason.startswith("NVIDIA_TESLA_P4 is not offered in us-east1 (machine table: us-central1, ")
    a2 = prices.quote("vertex", "machine", "a2-highgpu-1g", "us-east4")  # where its A100 is not offered
    assert a2.reason.startswith("a2-highgpu-1g carries NVIDIA_TESLA_A100, which is not offered in us-east4")
    for name, why in prices_data.COMPUTE_NOT_TAKEN.items():  # each row not taken says why, where it is offered
        kind = "machine" if name in machines.MACHINES else "accelerator"
        if name in machines.MACHINES or name in machines.ACCELERATORS:
            found = [prices.quote("compute", kind, name, region) for region in machines.REGIONS]
            assert all(not f.known for f in found) and any(why in f.reason for f in found), name


def test_the_estimate_marks_derived_prices_and_says_why_the_rest_is_unknown():
    headline = JobSpec(tier="CUSTOM", chief=Pool("chief", "n1-standard-16", 1, machines.T4, 4))
    lines = cost.estimate_lines(headline)
    assert lines[:3] == [
        "cost estimate (Vertex AI custom training, us-central1, on-demand prices):",
        "  chief: 1 x (n1-standard-16 $0.8740 (derived: 1.15 x Compute Engine $0.76) + 4 x NVIDIA_TESLA_T4 $1.6100 "
        "(derived: 1.15 x Compute Engine $0.35 each)) = 1 x $2.4840/h = $2.4840/h",
        "  rate: $2.4840/h (includes derived prices)"]
    assert lines[3].startswith("  prices: Compute Engine prices in SkyPilot's catalog v8")
    assert ("derived: Vertex AI = 1.15 x Compute Engine, on demand, for n1 machines and the GPUs they carry; "
            "evidence: n1-standard-4 $0.21849885 = 1.15 x $0.189999 (us-central1) and NVIDIA_TESLA_T4 $0.4025 = "
            "1.15 x $0.35 (us-central1)") in lines[3]
    spot = cost.estimate_lines(headline.replace(spot=True))
    assert spot[1] == ("  chief: 1 x (n1-standard-16 (spot) unknown + 4 x NVIDIA_TESLA_T4 (spot) unknown) = 1 x "
                       "unknown/h = unknown/h")
    assert spot[2].startswith("  rate: unknown — no price for n1-standard-16 (spot), 4 x NVIDIA_TESLA_T4 (spot): no "
                              "source gives Vertex AI spot prices, and the 1.15 rule is not applied to spot")
    stated = cost.estimate_lines(JobSpec(tier="BASIC"))
    assert stated[2] == "  rate: $0.2185/h" and "derived" not in "\n".join(stated)
    spec, budget = cost.apply_budget(headline, 10.0)
    said = cost.estimate_lines(spec, budget=budget)
    assert spec.max_runtime_seconds == 14492  # floor(10 x 3600 / 2.484) = floor(14492.75…)
    assert said[-1] == ("  budget: --max-cost 10 USD allows 4h01m32s; time limit 4h01m32s (set by --max-cost; the "
                        "rate includes derived prices)")


def test_the_headline_dry_run_prints_a_price():
    done = subprocess.run([sys.executable, "-m", "mlsubmit", "train", "--tier", "CUSTOM", "--gpus", "4", "--dry-run",
                           "--project", "my-project", "--region", "us-central1", "--staging-bucket",
                           "gs://my-bucket"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "  rate: $2.4840/h (includes derived prices)" in done.stderr + done.stdout
    assert "rate: unknown" not in done.stderr + done.stdout


def test_importing_the_table_imports_nothing_heavy():
    done = subprocess.run([sys.executable, "-c", "import sys, mlsubmit.jobspec.prices; "
                           "print(sorted({m.split('.')[0] for m in sys.modules} & {'yaml', 'typer', 'google', "
                           "'tensorflow', 'requests', 'pydantic'}))"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stderr
