"""The price table and the cost of jobs (#24): every combination the machine table knows has a price (stated, or
derived by the 1.15 rule) or an unknown with its reason; rates, maxima and budget time limits of a few jobs computed
by hand from the table's prices; --max-cost and --spot through the real CLI (one line, exit 2 for what cannot be
done; the estimate on stderr, the YAML on stdout)."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest
import yaml
from typer.testing import CliRunner

from mlsubmit.cli import app
from mlsubmit.errors import UsageError
from mlsubmit.jobspec import cost, machines, prices
from mlsubmit.jobspec.discovery import validate
from mlsubmit.jobspec.requests import vertex_job_spec
from mlsubmit.jobspec.spec import JobSpec, Pool
from mlsubmit.targets.base import JobStatus, PoolSummary

N1_4_VERTEX = 0.21849885  # Vertex AI custom training, n1-standard-4, us-central1 (Google's page, 2026-10-07)


# -- the table -----------------------------------------------------------------------------------------------------
def test_every_price_is_of_something_the_machine_table_knows_with_a_dated_source():
    names = {"machine": set(machines.MACHINES), "accelerator": set(machines.ACCELERATORS)}
    for (catalog, kind, name, region, spot), found in prices.TABLE.items():
        assert catalog in prices.CATALOGS and name in names[kind] and region in machines.REGIONS, (catalog, name)
        assert math.isfinite(found.usd) and found.usd > 0 and isinstance(spot, bool)
        assert prices.SOURCES[found.source].as_of and prices.SOURCES[found.source].where


@pytest.mark.parametrize("catalog", prices.CATALOGS)
@pytest.mark.parametrize("spot", [False, True])
def test_every_machine_accelerator_and_region_has_a_price_or_says_unknown(catalog, spot):
    for region in machines.REGIONS:
        for machine in machines.MACHINES.values():
            accelerators = [(a, counts[0]) for a, counts in machine.accelerators.items()] or [(None, 0)]
            for accelerator, count in accelerators:
                rate = prices.hourly(machine.name, accelerator, count, region, catalog=catalog, spot=spot)
                if rate.known:  # every part priced, and the sum is the parts' sum
                    assert rate.usd == pytest.approx(sum(usd for _, usd in rate.parts)) and rate.sources
                else:  # unknown says what: never a number for a part without a price
                    assert rate.missing and all(usd is None for what, usd in rate.parts if what in rate.missing)
    covered = prices.coverage(catalog, spot)
    assert set(covered) == set(machines.REGIONS)
    assert all(set(row) == {m for m, t in machines.MACHINES.items() if not t.is_legacy} | set(machines.ACCELERATORS)
               for row in covered.values())


def test_the_table_holds_what_its_sources_say_and_the_rest_is_derived_only_by_the_rule():
    assert prices.price("vertex", "machine", "n1-standard-4", "us-central1").usd == N1_4_VERTEX
    assert prices.price("vertex", "accelerator", machines.H100, "us-central1").usd == 9.79655057
    assert prices.price("vertex", "machine", "n1-standard-4", "us-east1") is None  # not scaled from us-central1
    assert prices.price("vertex", "machine", "n1-standard-8", "us-central1") is None  # not 2 x n1-standard-4
    assert prices.price("vertex", "machine", "n1-standard-4", "us-central1", spot=True) is None  # no spot copy
    compute = prices.hourly("n1-standard-4", None, 0, "us-central1", catalog="compute")
    assert (compute.usd, prices.hourly("n1-standard-4", None, 0, "us-central1", catalog="compute", spot=True).usd) \
        == (0.19, 0.05223)  # REFERENCE.md: $0.19, spot ≈ $0.052
    assert prices.price("compute", "accelerator", machines.T4, "us-central1").usd == 0.35
    assert prices.price("compute", "accelerator", machines.T4, "us-central1", spot=True).usd == 0.175
    legacy = prices.hourly("standard", None, 0, "us-central1")  # legacy `standard` is priced as n1-standard-4
    assert legacy.usd == N1_4_VERTEX
    legacy_gpu = prices.hourly("complex_model_m_gpu", None, 0, "us-central1")  # n1-standard-16 + 4 x K80
    assert legacy_gpu.missing == ("4 x NVIDIA_TESLA_K80",)  # the machine is derived, the retired K80 has no base
    assert "no K80 rows" in legacy_gpu.reasons["4 x NVIDIA_TESLA_K80"]
    # what the table lacks is derived for Vertex AI (n1 machines and their GPUs), never scaled or guessed
    assert prices.quote("vertex", "machine", "n1-standard-4", "us-east1").usd == 0.2185  # 1.15 x the $0.19 row
    assert prices.quote("vertex", "machine", "n1-standard-8", "us-central1").usd == 0.437  # 1.15 x $0.38, not 2 x
    assert not prices.quote("vertex", "machine", "n1-standard-4", "us-central1", spot=True).known  # on demand only


def test_compute_engine_gpu_nodes_by_hand_from_skypilots_rows():
    a2 = prices.hourly("a2-highgpu-1g", machines.A100, 1, "us-central1", catalog="compute")
    assert a2.usd == pytest.approx(0.73948 + 2.93391)  # 3.67339: the VM row + one A100 row, as Compute Engine bills
    a2_spot = prices.hourly("a2-highgpu-1g", machines.A100, 1, "us-central1", catalog="compute", spot=True)
    assert a2_spot.usd == pytest.approx(0.36975 + 1.4341)
    v100 = prices.hourly("n1-standard-8", machines.V100, 2, "europe-west4", catalog="compute")
    assert v100.usd == pytest.approx(0.41834 + 2 * 2.604) and v100.sources == ("skypilot-v8",)
    assert prices.price("compute", "accelerator", machines.T4, "asia-east1", spot=True).usd == 0.1383
    assert prices.price("compute", "accelerator", machines.K80, "us-central1") is None  # no K80 rows: retired
    assert prices.hourly("large_model", None, 0, "us-east4", catalog="compute").usd == 0.53293  # n1-highmem-8 row
    assert prices.hourly("n1-highcpu-16", None, 0, "europe-west4", catalog="compute", spot=True).usd == 0.24959
    assert prices.price("compute", "accelerator", machines.P4, "us-east1") is None  # no row for that region
    g2 = prices.hourly("g2-standard-8", machines.L4, 1, "us-central1", catalog="compute")
    assert g2.usd == pytest.approx(0.29358 + 0.56004)  # the g2 VM row + one L4 row
    a3 = prices.hourly("a3-highgpu-8g", machines.H100, 8, "us-central1", catalog="compute")
    assert a3.parts[0] == ("a3-highgpu-8g", 9.46006)  # the VM row, read 2026-11-28
    assert a3.missing == ("8 x NVIDIA_H100_80GB",) and "$4.20076 in us-central1" in a3.reasons["8 x NVIDIA_H100_80GB"]


# -- rates, maxima and budgets, by hand ----------------------------------------------------------------------------
def test_rates_and_maxima_of_a_few_jobs_by_hand():
    basic = JobSpec(tier="BASIC", max_runtime_seconds=7200)
    assert cost.job_rate(basic).usd == pytest.approx(0.21849885)  # 1 chief x $0.21849885
    lines = cost.estimate_lines(basic)
    assert "  rate: $0.2185/h" in lines
    assert "  at most: $0.4370 (2h00m00s time limit)" in lines  # 0.21849885 x 2 h = 0.4369977

    standard = JobSpec(tier="STANDARD_1")  # 1 chief + 4 workers + 3 ps, all n1-standard-4
    assert [(p.role, p.replicas, p.usd) for p in cost.job_rate(standard).pools] == [
        ("chief", 1, 0.21849885), ("worker", 4, 0.8739954), ("ps", 3, 0.65549655)]
    assert cost.job_rate(standard).usd == pytest.approx(1.7479908)  # 8 x 0.21849885

    gpus = JobSpec(tier="CUSTOM", chief=Pool("chief", "n1-standard-16", 1, machines.T4, 4))
    assert cost.job_rate(gpus).usd == pytest.approx(1.15 * (0.76 + 4 * 0.35))  # 2.484, derived (Vertex AI)
    assert cost.job_rate(gpus).derived and not cost.job_rate(gpus, catalog="compute").derived
    on_gke = cost.job_rate(gpus, catalog="compute")
    assert on_gke.usd == pytest.approx(0.76 + 4 * 0.35)  # 2.16: n1-standard-16 $0.76 + 4 T4 x $0.35
    assert cost.job_rate(gpus.replace(spot=True), catalog="compute").usd == pytest.approx(0.20892 + 4 * 0.175)

    tuned = cost.estimate_lines(JobSpec(tier="BASIC", max_runtime_seconds=3600), parallel=3, total=6, per="trials")
    assert "  rate: $0.2185/h x 3 trials at once = $0.6555/h" in tuned  # 3 x 0.21849885 = 0.65549655
    assert "  at most: $1.3110 (1h00m00s time limit x 6 trials)" in tuned  # 6 x 0.21849885 x 1 h = 1.3109931


def test_a_budget_sets_the_time_limit_rounded_down_and_the_smaller_limit_wins():
    spec, budget = cost.apply_budget(JobSpec(tier="BASIC"), 1.0)
    assert spec.max_runtime_seconds == 16476 == math.floor(1.0 * 3600 / 0.21849885)  # 16476.06… s
    assert (budget.allows_seconds, budget.limited_by) == (16476, "--max-cost")
    assert spec.labels_dict[cost.BUDGET_LABEL] == "1" and cost.budget_of(spec.labels_dict) == 1.0
    assert vertex_job_spec(spec)["scheduling"] == {"timeout": "16476s"}

    own, budget = cost.apply_budget(JobSpec(tier="BASIC", max_runtime_seconds=3600), 1.0)
    assert own.max_runtime_seconds == 3600 and budget.limited_by == "--max-runtime"

    trials, _ = cost.apply_budget(JobSpec(tier="BASIC"), 1.0, parallel=2, total=6)
    assert trials.max_runtime_seconds == 2746  # 3600 / (6 x 0.21849885) = 2746.01…: six trials fit in $1

    with pytest.raises(UsageError, match=r"billed at least 60 s, \$0\.0036"):  # 60 x 0.21849885 / 3600 = 0.00364
        cost.apply_budget(JobSpec(tier="BASIC"), 0.003)
    with pytest.raises(UsageError, match=r"no price is known for n1-standard-16 \(spot\), 4 x NVIDIA_TESLA_T4 "
                                         r"\(spot\): no source gives Vertex AI spot prices"):
        cost.apply_budget(JobSpec(tier="CUSTOM", chief=Pool("chief", "n1-standard-16", 1, machines.T4, 4), spot=True),
                          50)
    derived, budget = cost.apply_budget(JobSpec(tier="CUSTOM", chief=Pool("chief", "n1-standard-16", 1, machines.T4,
                                                                          4)), 50)
    assert derived.max_runtime_seconds == 72463 == math.floor(50 * 3600 / 2.484) and budget.derived  # 72463.76… s


@pytest.mark.parametrize("value", ["12.50", "7.5", "0.01", "$3"])
def test_budgets_read_and_round_trip_through_a_label(value):
    budget = cost.parse_budget(value)
    label = cost.budget_label(budget)
    assert set(label) <= set("0123456789_") and cost.budget_of({cost.BUDGET_LABEL: label}) == budget


@pytest.mark.parametrize("value", ["-1", "0", "nan", "inf", "1e400", "abc", ""])
def test_bad_budgets_are_refused(value):
    with pytest.raises(UsageError, match="--max-cost"):
        cost.parse_budget(value)


def test_spot_is_scheduling_strategy_spot_valid_for_the_discovery_document_and_a_gke_node_selector():
    spec = JobSpec(tier="BASIC", spot=True, max_runtime_seconds=600)
    body = vertex_job_spec(spec)
    assert body["scheduling"] == {"timeout": "600s", "strategy": "SPOT"}
    assert validate("aiplatform.v1", "GoogleCloudAiplatformV1CustomJobSpec", body) == []
    assert spec.spot_node_selector == {"cloud.google.com/gke-spot": "true"} and spec.deadline_seconds == 600
    assert JobSpec(tier="BASIC").spot_node_selector == {}


def test_cost_so_far_of_a_job_from_its_own_resource():
    status = JobStatus(api="vertex", name="projects/p/locations/us-central1/customJobs/1", job_id="1",
                       display_name="j", state="RUNNING", api_state="JOB_STATE_RUNNING", project="p",
                       region="us-central1", pools=(PoolSummary("chief", 1, "n1-standard-4"),
                                                    PoolSummary("worker", 2, "n1-standard-4")),
                       labels={cost.BUDGET_LABEL: "2_5"}, resource={"jobSpec": {"scheduling": {"timeout": "900s"}}})
    spent = cost.spent(status, 1800)
    assert spent["usd_per_hour"] == pytest.approx(3 * 0.21849885)  # 0.65549655 per hour
    assert spent["usd"] == pytest.approx(0.327748, abs=1e-6)  # half an hour: 0.65549655 / 2
    assert cost.spent_text(spent) == ("$0.3277 (estimated: 30m00s x $0.6555/h); budget $2.5000 (time limit "
                                      "15m00s)")
    spot = JobStatus(**{**status.__dict__, "resource": {"jobSpec": {"scheduling": {"strategy": "SPOT"}}}})
    assert cost.spent_text(cost.spent(spot, 60)).startswith("unknown (no price for n1-standard-4 (spot))")


# -- through the CLI -----------------------------------------------------------------------------------------------
def test_a_vertex_config_with_strategy_spot_stays_spot(tmp_path):
    config = tmp_path / "spot.yaml"
    config.write_text(yaml.safe_dump(vertex_job_spec(JobSpec(tier="BASIC", spot=True, max_runtime_seconds=600,
                                                                   package_uris=("gs://bkt/t-1.tar.gz",)))))
    result = CliRunner().invoke(app, ["config", "--config", str(config)])
    assert result.exit_code == 0, result.stderr
    assert yaml.safe_load(result.stdout)["scheduling"] == {"timeout": "600s", "strategy": "SPOT"}
    assert "warning" not in result.stderr and "spot prices" in result.stderr


def test_a_tuning_jobs_cost_so_far_is_its_trials_time():
    from mlsubmit.commands._jobs_view import ran_seconds

    trials = [{"startTime": "2026-01-01T00:00:00Z", "endTime": "2026-01-01T00:10:00Z"},
              {"startTime": "2026-01-01T00:00:00.5Z", "endTime": "2026-01-01T00:05:00.5Z"}, {}]
    status = JobStatus(api="vertex", name="n", job_id="1", display_name="t", state="SUCCEEDED", api_state="",
                       project="p", region="us-central1", start_time="2026-01-01T00:00:00Z",
                       end_time="2026-01-01T00:10:00Z", resource={"trials": trials})
    assert ran_seconds(status) == 900  # 600 + 300 s of trials (two at once), not the 600 s the study ran


def test_config_with_a_budget_writes_the_time_limit_and_says_the_estimate_on_stderr():
    result = CliRunner().invoke(app, ["config", "--tier", "BASIC", "--max-cost", "1"])
    assert result.exit_code == 0, result.stderr
    assert yaml.safe_load(result.stdout)["scheduling"] == {"timeout": "16476s"}
    assert "  budget: --max-cost 1 USD allows 4h34m36s; time limit 4h34m36s (set by --max-cost)" in result.stderr


@pytest.mark.parametrize("args, message", [
    (["config", "--tier", "BASIC", "--max-cost", "-3"], "invalid value for --max-cost: received '-3'"),
    (["config", "--tier", "BASIC", "--max-cost", "0.003"], "is billed at least 60 s, $0.0036"),
    (["config", "--tier", "BASIC", "--spot", "--max-cost", "20"], "no price is known for n1-standard-4 (spot): "
                                                                   "no source gives Vertex AI spot prices"),
    (["config", "--tier", "BASIC", "--spot", "--format", "legacy"], "invalid option for legacy AI Platform: --spot"),
    (["train", "--tier", "BASIC", "--spot", "--api", "legacy", "--dry-run", "--project", "p",
      "--region", "us-central1", "--staging-bucket", "gs://my-bucket"],
     "invalid option for legacy AI Platform: --spot"),
    (["train", "--local", "--spot"], "invalid option with --local: --spot"),
])
def test_what_cannot_be_done_is_one_line_exit_2(args, message):
    done = subprocess.run([sys.executable, "-m", "mlsubmit", *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.splitlines()) == 1 and message in done.stderr, done.stderr
    assert done.stdout == ""
