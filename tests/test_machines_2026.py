"""The machine table against what Vertex AI serves in 2026: the aiplatform v1 discovery document's accelerator enum
(google-api-python-client's copy, revision 20261106) and Google's "Configure compute resources" page.

Every enum accelerator is run or refused with a reason; the rows added for H200, B200, RTX PRO 6000 and TPU v5e are
the page's; jobs on them validate offline and their request bodies against the discovery schema; what they do not
come with is one UsageError line. Offline and fast: no package builds, no subprocesses.
"""

from __future__ import annotations

import json
import shlex

import pytest
from typer.testing import CliRunner

from mlsubmit.cli import app
from mlsubmit.emulator.plan import vertex_plan
from mlsubmit.errors import UsageError
from mlsubmit.images import choose
from mlsubmit.jobspec import discovery, machines, requests
from mlsubmit.jobspec.drafts import draft_from_vertex
from mlsubmit.jobspec.spec_input import RoleDraft, SpecDraft, build_spec

TPU_IMAGE = "us-docker.pkg.dev/me/tpu/jax:0.4.38"  # a TPU pool runs an image the user names (images.choose)

# "Configure compute resources for serverless training" (docs.cloud.google.com/gemini-enterprise-agent-platform/
# machine-learning/training/configure-compute): machine -> (accelerator, count) of its GPU table and TPU v5e table;
# vCPUs from Compute Engine's "Accelerator-optimized machine family" and the page's v5e comparison.
DOCUMENTED = {
    "a3-ultragpu-8g": ("NVIDIA_H200_141GB", 8, 224, None),
    "a4-highgpu-8g": ("NVIDIA_B200", 8, 224, None),
    "g4-standard-48": ("NVIDIA_RTX_PRO_6000", 1, 48, None),
    "g4-standard-96": ("NVIDIA_RTX_PRO_6000", 2, 96, None),
    "g4-standard-192": ("NVIDIA_RTX_PRO_6000", 4, 192, None),
    "g4-standard-384": ("NVIDIA_RTX_PRO_6000", 8, 384, None),
    "ct5lp-hightpu-1t": ("TPU_V5_LITEPOD", 1, 24, "1x1"),
    "ct5lp-hightpu-4t": ("TPU_V5_LITEPOD", 4, 112, "2x2"),
    "ct5lp-hightpu-8t": ("TPU_V5_LITEPOD", 8, 224, "2x4"),
}
OLD_REGIONS = ("asia-east1", "asia-northeast1", "asia-southeast1", "europe-west1", "europe-west4", "us-central1",
               "us-east1", "us-east4", "us-west1", "us-west4")


def _enum() -> list[str]:
    path = discovery.documents_dir() / "aiplatform.v1.json"
    document = json.loads(path.read_text(encoding="utf-8"))
    assert document["revision"] == "20261106"
    spec = document["schemas"]["GoogleCloudAiplatformV1MachineSpec"]["properties"]["acceleratorType"]
    return [name for name in spec["enum"] if name != "ACCELERATOR_TYPE_UNSPECIFIED"]


def _tpu_job(machine: str = "ct5lp-hightpu-4t", **fields) -> SpecDraft:
    fields.setdefault("executor_image", TPU_IMAGE)
    return SpecDraft(chief=RoleDraft(machine_type="n1-standard-4"), worker=RoleDraft(count=1, machine_type=machine),
                     region="us-west1", **fields)


def test_every_enum_accelerator_is_run_or_refused_with_a_reason():
    enum = _enum()
    assert set(machines.ACCELERATORS) | set(machines.REFUSED) == set(enum)
    assert not set(machines.ACCELERATORS) & set(machines.REFUSED)
    assert set(machines.REFUSED) == {"NVIDIA_GB200", "TPU_V4_POD"}
    for name, (why, instead) in machines.REFUSED.items():
        assert why and instead, name
    for name in set(machines.ACCELERATORS) - {"NVIDIA_TESLA_K80"}:  # K80: end of support, sent as T4 (requests)
        accelerator = machines.ACCELERATORS[name]
        assert accelerator.vertex and accelerator.regions, name
        assert any(name in m.accelerators for m in machines.MACHINES.values()), f"no machine carries {name}"
    assert machines.GPU_TYPES + machines.TPU_TYPES == tuple(machines.ACCELERATORS)  # the CLI's choices
    assert machines.REGIONS == OLD_REGIONS  # the new rows add no region


@pytest.mark.parametrize("name", DOCUMENTED)
def test_the_new_machines_are_the_pages(name):
    accelerator, count, vcpus, topology = DOCUMENTED[name]
    machine = machines.MACHINES[name]
    assert (machine.accelerators, machine.vcpus, machine.fixed, machine.tpu_topology) == (
        {accelerator: (count,)}, vcpus, True, topology)
    assert machine.implicit == (accelerator, count)
    assert machines.default_gpu_machine(accelerator, count) == name  # `--gpu-type X --gpus N` alone finds it


def test_the_help_table_tells_the_new_rows():
    table = machines.describe_table()
    for text in ("a2/a3/a4/g2/g4 machines come with their GPUs", "a3-ultragpu-8g: 8 H200_141GB",
                 "a4-highgpu-8g: 8 B200", "g4-standard-96: 2 RTX_PRO_6000",
                 "ct5lp-hightpu-1t: 1 (1x1); ct5lp-hightpu-4t: 4 (2x2); ct5lp-hightpu-8t: 8 (2x4)",
                 "Not run by mlsubmit (the error says why): NVIDIA_GB200 (a4x-highgpu-4g), TPU_V4_POD"):
        assert text in table, text


def test_regions_of_the_new_rows_are_the_conservative_ones_the_code_cites():
    assert {n: machines.ACCELERATORS[n].regions for n in ("NVIDIA_H200_141GB", "NVIDIA_B200", "NVIDIA_RTX_PRO_6000",
                                                           "TPU_V5_LITEPOD")} == {
        "NVIDIA_H200_141GB": ("us-central1",), "NVIDIA_B200": ("us-central1",),
        "NVIDIA_RTX_PRO_6000": ("us-central1",), "TPU_V5_LITEPOD": ("us-west1",)}
    assert all(not a.legacy for n, a in machines.ACCELERATORS.items()
               if n in ("NVIDIA_H200_141GB", "NVIDIA_B200", "NVIDIA_RTX_PRO_6000", "TPU_V5_LITEPOD"))


@pytest.mark.parametrize("draft, machine_spec", [
    (SpecDraft(chief=RoleDraft(accelerator_type="NVIDIA_H200_141GB", accelerator_count="8"), job_name="h200"),
     {"machineType": "a3-ultragpu-8g", "acceleratorType": "NVIDIA_H200_141GB", "acceleratorCount": 8}),
    (SpecDraft(chief=RoleDraft(machine_type="a4-highgpu-8g"), job_name="b200"),
     {"machineType": "a4-highgpu-8g", "acceleratorType": "NVIDIA_B200", "acceleratorCount": 8}),
    (SpecDraft(chief=RoleDraft(machine_type="g4-standard-96"), worker=RoleDraft(count=2), job_name="g4"),
     {"machineType": "g4-standard-96", "acceleratorType": "NVIDIA_RTX_PRO_6000", "acceleratorCount": 2}),
    (_tpu_job(job_name="v5e"), {"machineType": "ct5lp-hightpu-4t", "tpuTopology": "2x2"}),
], ids=["H200", "B200", "RTX PRO 6000", "TPU v5e"])
def test_a_job_on_the_new_rows_validates_offline_and_its_body_against_the_discovery_schema(draft, machine_spec):
    spec = build_spec(draft)
    body = requests.vertex_custom_job(spec)
    assert discovery.validate("aiplatform.v1", "GoogleCloudAiplatformV1CustomJob", body) == []
    pools = body["jobSpec"]["workerPoolSpecs"]
    assert pools[0]["machineSpec"] == machine_spec
    if "tpuTopology" in machine_spec:  # configure-compute: one worker pool, one replica; the n1 chief is dropped
        assert len(pools) == 1 and pools[0]["replicaCount"] == "1"
        assert pools[0]["containerSpec"]["imageUri"] == TPU_IMAGE
        assert spec.pools["worker"].tpu_topology == "2x2" and spec.pools["worker"].accelerator_kind == "tpu"


@pytest.mark.parametrize("machine", ["ct5lp-hightpu-1t", "ct5lp-hightpu-8t"])
def test_each_v5e_machine_names_its_slice(machine):
    pools = requests.vertex_job_spec(build_spec(_tpu_job(machine)))["workerPoolSpecs"]
    assert pools[0]["machineSpec"] == {"machineType": machine, "tpuTopology": DOCUMENTED[machine][3]}


def test_every_machine_accelerator_and_count_validates_in_its_first_region():
    """The whole table, TPU VMs included (they are the worker, and need their region)."""
    checked = 0
    for machine in machines.MACHINES.values():
        if machine.is_legacy:
            continue
        for accelerator, counts in machine.accelerators.items():
            region = machines.ACCELERATORS[accelerator].regions[0]
            for count in counts:
                role = RoleDraft(machine_type=machine.name, accelerator_type=accelerator, accelerator_count=count)
                draft = SpecDraft(worker=RoleDraft(count=1, machine_type=machine.name, accelerator_type=accelerator,
                                                   accelerator_count=count), region=region) \
                    if machine.family == "tpu" else SpecDraft(chief=role, region=region)
                body = requests.vertex_custom_job(build_spec(draft).replace(job_name="j"))
                assert discovery.validate("aiplatform.v1", "GoogleCloudAiplatformV1CustomJob", body) == [], \
                    (machine.name, accelerator, count)
                checked += 1
    assert checked > 100


def test_a_v5e_pool_gets_the_tpu_image_decision_and_its_refusal_names_what_to_use():
    spec = build_spec(_tpu_job()).replace(executor_image=None)
    choice = choose.choose(spec)  # pool 0 is the TPU VM
    assert choice.kind == "tpu"
    refusal = choose.refusal(choice)
    assert refusal is not None and "Vertex AI serves no TensorFlow TPU training image any more" in refusal.message
    assert "--executor-image" in refusal.hint


CASES = [
    # what a machine does not come with: one line, exit 2
    ("--machine-type a3-ultragpu-8g --gpus 4",
     "invalid chief accelerators: a3-ultragpu-8g cannot carry 4 NVIDIA_H200_141GB; allowed counts: 8"),
    ("--machine-type g4-standard-48 --gpu-type NVIDIA_L4 --gpus 1",
     "invalid chief accelerators: g4-standard-48 cannot carry NVIDIA_L4; accelerators it carries: "
     "NVIDIA_RTX_PRO_6000; machines that carry 1 NVIDIA_L4: g2-standard-4, g2-standard-8, g2-standard-12"),
    ("--gpu-type NVIDIA_RTX_PRO_6000 --gpus 3",
     "invalid value for --gpus: received 3; expected a count of NVIDIA_RTX_PRO_6000 one machine can carry: "
     "1, 2, 4, 8"),
    ("--machine-type a4-highgpu-8g --region europe-west4",
     "invalid value for --region: NVIDIA_B200 (chief) is not offered in europe-west4; regions that offer it: "
     "us-central1; use --region us-central1"),
    ("--machine-type n1-standard-4 --worker-machine-type ct5lp-hightpu-4t --workers 1",
     "invalid value for --region: TPU_V5_LITEPOD (workers) is not offered in us-central1; regions that offer it: "
     "us-west1; use --region us-west1"),
    ("--machine-type ct5lp-hightpu-4t --region us-west1",
     "invalid chief machine type: ct5lp-hightpu-4t only serves as the one TPU worker; the chief is never a TPU; "
     "use --worker-machine-type ct5lp-hightpu-4t --workers 1"),
    ("--machine-type n1-standard-4 --worker-machine-type ct5lp-hightpu-8t --workers 2 --region us-west1",
     "invalid value for workers count: received 2; expected 1 with a ct5lp-hightpu-8t worker (one TPU worker per "
     "job)"),
    ("--machine-type n1-standard-4 --worker-machine-type ct5lp-hightpu-4t --workers 1 --ps 1 --region us-west1",
     "invalid cluster: a ct5lp-hightpu-4t TPU VM job runs in one worker pool on Vertex AI; received parameter "
     "servers too; drop --ps and --evaluators"),
    ("--machine-type n1-standard-8 --gpu-type TPU_V5_LITEPOD --gpus 8",
     "invalid chief accelerators: n1-standard-8 cannot carry TPU_V5_LITEPOD; accelerators it carries: "
     "NVIDIA_TESLA_K80, NVIDIA_TESLA_V100, NVIDIA_TESLA_P4, NVIDIA_TESLA_P100, NVIDIA_TESLA_T4; TPUs run on one "
     "ct5lp-hightpu-8t worker: --worker-machine-type ct5lp-hightpu-8t --workers 1"),
    ("--gpu-type NVIDIA_H200_141GB --gpus 8 --format legacy",
     "invalid value for --format legacy: NVIDIA_H200_141GB (chief a3-ultragpu-8g) is not available on legacy AI "
     "Platform; it offers NVIDIA_TESLA_K80, NVIDIA_TESLA_P4, NVIDIA_TESLA_P100, NVIDIA_TESLA_V100, NVIDIA_TESLA_T4, "
     "NVIDIA_TESLA_A100, TPU_V2, TPU_V3; use --format vertex"),
    # refused, with the reason and what to use instead
    ("--gpu-type NVIDIA_GB200 --gpus 4",
     "invalid value for --gpu-type: received 'NVIDIA_GB200'; expected an accelerator mlsubmit runs; "
     f"{machines.REFUSED['NVIDIA_GB200'][0]}; {machines.REFUSED['NVIDIA_GB200'][1]}"),
    ("--machine-type a4x-highgpu-4g",
     "invalid value for --machine-type: received 'a4x-highgpu-4g'; expected a machine type mlsubmit runs; "
     f"a4x-highgpu-4g carries NVIDIA_GB200: {machines.REFUSED['NVIDIA_GB200'][0]}; "
     f"{machines.REFUSED['NVIDIA_GB200'][1]}"),
    ("--machine-type n1-standard-4 --gpu-type TPU_V4_POD --gpus 8",
     "invalid value for chief accelerator type: received 'TPU_V4_POD'; expected an accelerator mlsubmit runs; "
     f"{machines.REFUSED['TPU_V4_POD'][0]}; {machines.REFUSED['TPU_V4_POD'][1]}"),
]


@pytest.mark.parametrize("args, message", CASES, ids=[c[0][:60] for c in CASES])
def test_what_a_machine_does_not_come_with_is_one_line_exit_2(args, message, tmp_path):
    output = tmp_path / "out.yaml"
    result = CliRunner().invoke(app, ["config", *shlex.split(args), "-o", str(output)])
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines() == [f"error: {message}"]
    assert not output.exists()


def test_a_multi_host_v5e_slice_is_refused_with_the_slices_mlsubmit_runs():
    """configure-compute also lists ct5lp-hightpu-4t slices of 8 to 256 chips on 2 to 64 VMs: not offered here."""
    draft = SpecDraft(chief=RoleDraft(machine_type="n1-standard-4"), region="us-west1",
                      worker=RoleDraft(count=1, machine_type="ct5lp-hightpu-4t", accelerator_count="16"))
    with pytest.raises(UsageError) as raised:
        build_spec(draft)
    assert raised.value.one_line() == (
        "invalid workers accelerators: ct5lp-hightpu-4t cannot carry 16 TPU_V5_LITEPOD; allowed counts: 4; "
        "TPU_V5_LITEPOD slices mlsubmit runs, on one worker VM: ct5lp-hightpu-1t 1, ct5lp-hightpu-4t 4, "
        "ct5lp-hightpu-8t 8")


def test_refused_accelerators_are_refused_whichever_way_they_come():
    body = {"workerPoolSpecs": [{"machineSpec": {"machineType": "a4x-highgpu-4g", "acceleratorType": "NVIDIA_GB200",
                                                 "acceleratorCount": 4}, "replicaCount": "1"}]}
    with pytest.raises(UsageError, match="a4x-highgpu-4g carries NVIDIA_GB200: Vertex AI runs it only on capacity "
                                         "from a shared reservation"):
        build_spec(draft_from_vertex(body)[0])


def test_the_emulator_reads_a_tpu_vm_body_back_as_one_tpu_worker_that_runs_the_program():
    """Vertex AI runs the program on the TPU VM (pool 0) alone: the emulator plans that one replica (the chief of its
    cluster) and knows it stands in for a TPU VM."""
    spec = build_spec(_tpu_job(job_name="v5e", job_dir="gs://bkt/v5e", package_uris=("gs://bkt/p/t-0.1.tar.gz",),
                               executor_image="tensorflow/tensorflow:2.21.0"))
    body = requests.vertex_custom_job(spec)
    plan = vertex_plan(body, "p", "us-west1", "1")
    assert [replica.task for replica in plan.replicas] == ["workerpool0-0"]
    assert plan.tpu == "ct5lp-hightpu-4t" and list(plan.spec.pools) == ["chief"]
