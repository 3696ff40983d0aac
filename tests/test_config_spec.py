"""JobSpec and its builder: defaults from the table, flags over YAML, immutability, what later work reads."""

from __future__ import annotations

import dataclasses

import pytest

from mlsubmit.jobspec import machines
from mlsubmit.errors import UsageError
from mlsubmit.jobspec.spec import JobSpec, Pool
from mlsubmit.jobspec.spec_input import RoleDraft, SpecDraft, build_spec, load_yaml, merge, parse_duration


def shape(spec: JobSpec) -> dict:
    return {role: (p.replica_count, p.machine_type, p.accelerator) for role, p in spec.pools.items()}


@pytest.mark.parametrize("tier, expected", [
    ("BASIC", {"chief": (1, "n1-standard-4", None)}),
    ("STANDARD_1", {"chief": (1, "n1-standard-4", None), "worker": (4, "n1-standard-4", None),
                    "ps": (3, "n1-standard-4", None)}),
    ("PREMIUM_1", {"chief": (1, "n1-standard-4", None), "worker": (19, "n1-standard-4", None),
                   "ps": (11, "n1-standard-4", None)}),
    ("BASIC_GPU", {"chief": (1, "n1-standard-8", ("NVIDIA_TESLA_K80", 1))}),
    ("BASIC_TPU", {"chief": (1, "n1-standard-4", None), "worker": (1, "cloud-tpu", ("TPU_V2", 8))}),
])
def test_each_tier_expands_from_the_table(tier, expected):
    assert shape(build_spec(SpecDraft(tier=tier))) == expected


@pytest.mark.parametrize("gpus, gpu_type, machine", [
    (1, None, "n1-standard-8"), (2, None, "n1-standard-8"), (4, None, "n1-standard-16"),
    (8, "NVIDIA_TESLA_V100", "n1-standard-32"), (4, "NVIDIA_TESLA_A100", "a2-highgpu-4g"),
    (1, "NVIDIA_L4", "g2-standard-4"), (8, "NVIDIA_H100_80GB", "a3-highgpu-8g"),
])
def test_gpus_without_machine_type_pick_a_machine_that_carries_them(gpus, gpu_type, machine):
    spec = build_spec(SpecDraft(chief=RoleDraft(accelerator_count=str(gpus), accelerator_type=gpu_type)))
    assert spec.tier == "CUSTOM"
    assert shape(spec)["chief"] == (1, machine, (gpu_type or machines.DEFAULT_GPU_TYPE, gpus))


def test_workers_default_to_the_chief_machine_and_ps_to_a_cpu_machine():
    spec = build_spec(SpecDraft(chief=RoleDraft(accelerator_count="2"), worker=RoleDraft(count="3"),
                                ps=RoleDraft(count="1"), evaluator=RoleDraft(count="1")))
    assert shape(spec) == {"chief": (1, "n1-standard-8", ("NVIDIA_TESLA_T4", 2)),
                           "worker": (3, "n1-standard-8", ("NVIDIA_TESLA_T4", 2)),
                           "ps": (1, "n1-standard-4", None),
                           "evaluator": (1, "n1-standard-8", ("NVIDIA_TESLA_T4", 2))}


def test_what_the_local_runner_and_submit_read():
    spec = build_spec(SpecDraft(tier="CUSTOM", chief=RoleDraft(machine_type="complex_model_m_gpu"),
                                worker=RoleDraft(count=2), args=("--epochs", "2"), job_dir="gs://bkt/run",
                                job_name="run_1", labels=(("team", "ml"),), max_runtime="1h30m",
                                package_uris=("gs://bkt/pkg/trainer-0.1.0.tar.gz",)))
    chief = spec.pool("chief")
    assert (chief.replica_count, chief.machine_type, chief.accelerator) == (1, "complex_model_m_gpu",
                                                                              ("NVIDIA_TESLA_K80", 4))
    assert spec.pool("worker").replica_count == 2 and spec.pool("ps") is None
    assert (spec.chief_name("legacy"), spec.chief_name("vertex")) == ("master", "chief")
    assert spec.python_module == "trainer.task" and spec.args == ("--epochs", "2")
    assert (spec.job_dir, spec.job_name, spec.labels_dict, spec.region) == ("gs://bkt/run", "run_1",
                                                                             {"team": "ml"}, "us-central1")
    assert spec.timeout == "5400s" and spec.package_uris == ("gs://bkt/pkg/trainer-0.1.0.tar.gz",)


def test_spec_is_frozen_and_replace_validates_again():
    spec = build_spec(SpecDraft(chief=RoleDraft(accelerator_count=4)))
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.region = "europe-west4"  # type: ignore[misc]
    assert spec.replace(region="europe-west4").region == "europe-west4"
    with pytest.raises(UsageError, match="NVIDIA_TESLA_T4 cannot|cannot carry 3"):
        spec.replace(chief=spec.chief.replace(accelerator_count=3))
    with pytest.raises(UsageError, match="only allowed with --tier CUSTOM"):
        spec.replace(tier="BASIC")


def test_local_target_accepts_a_local_job_dir_cloud_needs_gs():
    draft = SpecDraft(job_dir="/tmp/run", package_uris=("dist/trainer.tar.gz",))
    assert build_spec(draft, target="local").job_dir == "/tmp/run"
    with pytest.raises(UsageError, match="--job-dir"):
        build_spec(draft, target="cloud")


def test_at_most_100_package_uris():
    uris = tuple(f"gs://bkt/p/{i}.tar.gz" for i in range(101))
    assert len(JobSpec(package_uris=uris[:100]).package_uris) == 100
    with pytest.raises(UsageError, match="invalid value for packageUris: received '101 URIs'; expected at most 100"):
        JobSpec(package_uris=uris)


def test_pool_rejects_a_second_chief_and_bool_counts():
    with pytest.raises(UsageError, match="chief count"):
        Pool("chief", "n1-standard-4", 2)
    with pytest.raises(UsageError, match="workers count"):
        Pool("worker", "n1-standard-4", True)


@pytest.mark.parametrize("text, seconds", [("7200", 7200), ("7200s", 7200), ("90m", 5400), ("2h", 7200),
                                           ("1h30m", 5400), ("1d", 86400), (60, 60)])
def test_durations(text, seconds):
    assert parse_duration(text, "--max-runtime") == seconds


def test_flags_override_yaml(tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text("labels: {team: ml, stage: dev}\ntrainingInput:\n  scaleTier: CUSTOM\n"
                    "  masterType: n1-standard-8\n  masterConfig:\n    acceleratorConfig: {count: '2', type: "
                    "NVIDIA_TESLA_T4}\n  workerCount: '2'\n  workerType: n1-standard-8\n  region: us-east1\n"
                    "  runtimeVersion: '2.11'\n")
    from_yaml, notes = load_yaml(path)
    assert notes == []
    assert shape(build_spec(from_yaml))["chief"] == (1, "n1-standard-8", ("NVIDIA_TESLA_T4", 2))
    more_gpus = build_spec(merge(from_yaml, SpecDraft(chief=RoleDraft(accelerator_count="4"),
                                                      labels=(("stage", "prod"),))))
    assert shape(more_gpus)["chief"] == (1, "n1-standard-8", ("NVIDIA_TESLA_T4", 4))
    assert more_gpus.labels_dict == {"team": "ml", "stage": "prod"} and more_gpus.region == "us-east1"
    # a new machine type drops the YAML's accelerators, which belonged to the old machine
    bigger = build_spec(merge(from_yaml, SpecDraft(chief=RoleDraft(machine_type="n1-highmem-16"))))
    assert shape(bigger)["chief"] == (1, "n1-highmem-16", None)
    # a fixed tier replaces the YAML's cluster; an executor image replaces its runtime version
    basic = build_spec(merge(from_yaml, SpecDraft(tier="BASIC", executor_image="gcr.io/p/img:1")))
    assert (basic.tier, basic.pools["chief"].machine_type, basic.runtime_version, basic.executor_image) == \
        ("BASIC", "n1-standard-4", None, "gcr.io/p/img:1")
