"""A corpus of invalid job specs, each with the exact one-line error a user sees (exit code 2, nothing written).

Each case runs the real `mlsubmit config` command through typer's CliRunner.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mlsubmit.cli import app

YAML_FILES = {
    "unknown.yaml": "trainingInput:\n  scaleTier: CUSTOM\n  masterType: n1-standard-4\n  workerCont: 2\n",
    "malformed.yaml": "trainingInput:\n  scaleTier: CUSTOM\n   masterType: x\n",
    "float.yaml": "trainingInput:\n  scaleTier: BASIC\n  runtimeVersion: 2.11\n",
    "neither.yaml": "foo: 1\n",
    "negative.yaml": "trainingInput:\n  scaleTier: CUSTOM\n  masterType: n1-standard-4\n  workerCount: '-1'\n"
                     "  workerType: n1-standard-4\n",
    "fraction.yaml": "trainingInput:\n  scaleTier: CUSTOM\n  masterType: n1-standard-4\n  parameterServerCount: 1.5\n"
                     "  parameterServerType: n1-standard-4\n",
    "chief2.yaml": "workerPoolSpecs:\n- machineSpec: {machineType: n1-standard-4}\n  replicaCount: 2\n",
    "badenum.yaml": "workerPoolSpecs:\n- machineSpec: {machineType: n1-standard-4, acceleratorType: NVIDIA_T4, "
                    "acceleratorCount: 1}\n",
    "list.yaml": "- trainingInput\n",
    "legacygpu.yaml": "trainingInput:\n  scaleTier: CUSTOM\n  masterType: complex_model_m_gpu\n  masterConfig:\n"
                      "    acceleratorConfig: {count: '4', type: NVIDIA_TESLA_K80}\n",
}
LONG = "j" * 129
ALL_ACCELERATORS = ("NVIDIA_TESLA_K80, NVIDIA_TESLA_P4, NVIDIA_TESLA_P100, NVIDIA_TESLA_V100, NVIDIA_TESLA_T4, "
                    "NVIDIA_TESLA_A100, NVIDIA_A100_80GB, NVIDIA_L4, NVIDIA_H100_80GB, NVIDIA_H100_MEGA_80GB, "
                    "NVIDIA_H200_141GB, NVIDIA_B200, NVIDIA_RTX_PRO_6000, TPU_V2, TPU_V3, TPU_V5_LITEPOD")
REGIONS = ("asia-east1, asia-northeast1, asia-southeast1, europe-west1, europe-west4, us-central1, us-east1, "
           "us-east4, us-west1, us-west4")

CASES = [
    # accelerator x machine x count, from the one table
    ("--tier CUSTOM --machine-type n1-standard-4 --gpus 3",
     "invalid chief accelerators: n1-standard-4 cannot carry 3 NVIDIA_TESLA_T4; allowed counts: 1, 2, 4"),
    ("--machine-type n1-standard-32 --gpus 1",
     "invalid chief accelerators: n1-standard-32 cannot carry 1 NVIDIA_TESLA_T4; allowed counts: 2, 4; "
     "machines that carry 1 NVIDIA_TESLA_T4: n1-standard-4, n1-standard-8, n1-highmem-2"),
    ("--machine-type n1-standard-16 --gpu-type NVIDIA_TESLA_V100 --gpus 1",
     "invalid chief accelerators: n1-standard-16 cannot carry 1 NVIDIA_TESLA_V100; allowed counts: 2, 4, 8; "
     "machines that carry 1 NVIDIA_TESLA_V100: n1-standard-4, n1-standard-8, n1-highmem-2"),
    ("--machine-type n1-standard-64 --gpu-type NVIDIA_TESLA_P100 --gpus 4",
     "invalid chief accelerators: n1-standard-64 cannot carry NVIDIA_TESLA_P100; accelerators it carries: "
     "NVIDIA_TESLA_V100, NVIDIA_TESLA_P4, NVIDIA_TESLA_T4; machines that carry 4 NVIDIA_TESLA_P100: "
     "n1-standard-4, n1-standard-8, n1-highmem-2"),
    ("--machine-type a2-highgpu-4g --gpus 2",
     "invalid chief accelerators: a2-highgpu-4g cannot carry 2 NVIDIA_TESLA_A100; allowed counts: 4; "
     "machines that carry 2 NVIDIA_TESLA_A100: a2-highgpu-2g"),
    ("--gpus 8",
     "invalid value for --gpus: received 8; expected a count of NVIDIA_TESLA_T4 one machine can carry: 1, 2, 4; "
     "or use --gpu-type NVIDIA_TESLA_V100 for 8"),
    ("--gpus 2 --gpu-type NVIDIA_TESLA_T5",
     f"invalid value for --gpu-type: received 'NVIDIA_TESLA_T5'; expected one of {ALL_ACCELERATORS}; "
     "did you mean 'NVIDIA_TESLA_T4'?"),
    ("--machine-type n1-standrd-4",
     "invalid value for --machine-type: received 'n1-standrd-4'; expected a machine type from `mlsubmit config "
     "--help` (n1-*, a2-*, a3-*, a4-*, g2-*, g4-*, cloud-tpu, ct5lp-* or a legacy type such as complex_model_m_gpu); "
     "did you mean 'n1-standard-4'?"),
    # legacy machine types: never an acceleratorConfig, never mixed
    ("--machine-type complex_model_m_gpu --gpus 4",
     "invalid chief accelerators: complex_model_m_gpu is a legacy machine type with 4 NVIDIA_TESLA_K80 built in "
     "and never carries an acceleratorConfig; drop --gpus/--gpu-type, or use its Compute Engine equivalent "
     "n1-standard-16 to choose GPUs"),
    ("--config legacygpu.yaml",
     "invalid chief accelerators: complex_model_m_gpu is a legacy machine type with 4 NVIDIA_TESLA_K80 built in "
     "and never carries an acceleratorConfig; drop --gpus/--gpu-type, or use its Compute Engine equivalent "
     "n1-standard-16 to choose GPUs"),
    ("--machine-type n1-standard-4 --workers 1 --worker-machine-type complex_model_m",
     "invalid cluster: legacy machine types are never mixed with Compute Engine machine types; received chief "
     "n1-standard-4, workers complex_model_m; use one kind for every role"),
    # counts only with CUSTOM; negative or non-integer counts
    ("--tier BASIC --workers 2",
     "invalid value for --workers: machine types and counts are only allowed with --tier CUSTOM; received "
     "--tier BASIC; use --tier CUSTOM, or drop those options"),
    ("--tier STANDARD_1 --gpus 1 --machine-type n1-standard-8",
     "invalid value for --machine-type, --gpus: machine types and counts are only allowed with --tier CUSTOM; "
     "received --tier STANDARD_1; use --tier CUSTOM, or drop those options"),
    ("--tier premium", "invalid value for --tier: received 'premium'; expected one of BASIC, STANDARD_1, PREMIUM_1, "
     "BASIC_GPU, BASIC_TPU, CUSTOM; did you mean 'PREMIUM_1'?"),
    ("--gpus -1", "invalid value for --gpus: received '-1'; expected a whole number >= 0"),
    ("--workers 1.5", "invalid value for --workers: received '1.5'; expected a whole number >= 0"),
    ("--ps two", "invalid value for --ps: received 'two'; expected a whole number >= 0"),
    ("--config negative.yaml", "invalid value for trainingInput.workerCount: received '-1'; expected a whole "
     "number >= 0"),
    ("--config fraction.yaml", "invalid --config fraction.yaml: trainingInput.parameterServerCount: expected an "
     "int64 as a decimal string; received the number 1.5"),
    ("--config chief2.yaml", "invalid value for workerPoolSpecs[0].replicaCount: received 2; expected 1 (the "
     "chief is one machine)"),
    # TPU rules
    ("--machine-type cloud-tpu", "invalid chief machine type: cloud-tpu only serves as the one TPU worker; the "
     "chief is never a TPU; use --worker-machine-type cloud-tpu --workers 1"),
    ("--worker-machine-type cloud-tpu --workers 2",
     "invalid value for workers count: received 2; expected 1 with a cloud-tpu worker (one TPU worker per job)"),
    ("--machine-type n1-standard-4 --gpu-type TPU_V2 --gpus 8",
     "invalid chief accelerators: n1-standard-4 cannot carry TPU_V2; accelerators it carries: NVIDIA_TESLA_K80, "
     "NVIDIA_TESLA_V100, NVIDIA_TESLA_P4, NVIDIA_TESLA_P100, NVIDIA_TESLA_T4; TPUs run on one cloud-tpu worker: "
     "--worker-machine-type cloud-tpu --workers 1"),
    ("--worker-machine-type cloud_tpu --workers 1 --gpu-type TPU_V3 --gpus 8 --machine-type n1-standard-8",
     "invalid chief accelerators: n1-standard-8 cannot carry TPU_V3; accelerators it carries: NVIDIA_TESLA_K80, "
     "NVIDIA_TESLA_V100, NVIDIA_TESLA_P4, NVIDIA_TESLA_P100, NVIDIA_TESLA_T4; TPUs run on one cloud-tpu worker: "
     "--worker-machine-type cloud-tpu --workers 1"),
    ("--tier BASIC_TPU --region asia-southeast1",
     "invalid value for --region: TPU_V2 (workers) is not offered in asia-southeast1; regions that offer it: "
     "us-central1, europe-west4, asia-east1; use --region us-central1"),
    # region x accelerator
    ("--gpus 1 --gpu-type NVIDIA_TESLA_V100 --region europe-west1",
     "invalid value for --region: NVIDIA_TESLA_V100 (chief) is not offered in europe-west1; regions that offer "
     "it: us-central1, us-east1, us-west1, europe-west4, asia-east1; use --region us-central1"),
    ("--tier BASIC_GPU --region us-east4",
     "invalid value for --region: NVIDIA_TESLA_K80 (chief) is not offered in us-east4; regions that offer it: "
     "us-central1, us-east1, us-west1, europe-west1, asia-east1; use --region us-central1"),
    ("--region us-centrl1", f"invalid value for --region: received 'us-centrl1'; expected one of {REGIONS}; "
     "did you mean 'us-central1'?"),
    # names, paths, packages, labels, runtime
    ("--job-name my-job --format legacy", "invalid value for --job-name: received 'my-job'; expected a legacy "
     "job id: a letter, then letters, digits or _, at most 128 characters; use --job-name my_job"),
    ("--job-name 9lives --format legacy", "invalid value for --job-name: received '9lives'; expected a legacy "
     "job id: a letter, then letters, digits or _, at most 128 characters; use --job-name job_9lives"),
    (f"--job-name {LONG}", f"invalid value for --job-name: received '{LONG}'; expected 1 to 128 characters"),
    ("--job-dir /tmp/out", "invalid value for --job-dir: received '/tmp/out'; expected gs://BUCKET/PATH with a "
     "valid bucket name (cloud jobs use Cloud Storage); use a gs:// path, or run locally"),
    ("--runtime-version 2.11 --executor-image gcr.io/x/y", "invalid runtime: received both --runtime-version 2.11 "
     "and --executor-image gcr.io/x/y; expected one of them; drop one of them"),
    ("--runtime-version 2", "invalid value for --runtime-version: received '2'; expected MAJOR.MINOR such as "
     "'2.11'"),
    ("--python-module trainer/task.py", "invalid value for --python-module: received 'trainer/task.py'; expected "
     "a dotted module name such as trainer.task"),
    ("--label Team=ml", "invalid value for --label: received 'Team=ml'; expected a key of lowercase letters, "
     "digits, _ or -, starting with a letter, at most 63 characters"),
    ("--label team", "invalid value for --label: received 'team'; expected KEY=VALUE; write --label team=VALUE"),
    ("--max-runtime 2days", "invalid value for --max-runtime: received '2days'; expected a duration such as "
     "7200s, 90m, 2h or 1h30m"),
    ("--max-runtime 0", "invalid value for --max-runtime: received '0'; expected a duration longer than 0 "
     "seconds"),
    ("--max-runtime 2 hours", "invalid value for arguments: received 'hours'; expected options only; put trainer "
     "arguments after --: … -- hours"),
    ("--format json", "invalid value for --format: received 'json'; expected vertex or legacy or kubernetes"),
    ("--gpus 1 --gpu-type NVIDIA_L4 --format legacy", "invalid value for --format legacy: NVIDIA_L4 (chief "
     "g2-standard-4) is not available on legacy AI Platform; it offers NVIDIA_TESLA_K80, NVIDIA_TESLA_P4, "
     "NVIDIA_TESLA_P100, NVIDIA_TESLA_V100, NVIDIA_TESLA_T4, NVIDIA_TESLA_A100, TPU_V2, TPU_V3; use --format "
     "vertex"),
    ("--executor-image gcr.io/me/custom:1 --format legacy", "invalid value for --executor-image: received "
     "'gcr.io/me/custom:1'; a legacy job names a runtime version, and only a Vertex AI prebuilt TensorFlow image "
     "maps to one; pass --runtime-version instead, or --api vertex"),
    # YAML: unknown keys with did-you-mean, malformed, wrong types
    ("--config missing.yaml", "invalid value for --config: received 'missing.yaml'; expected a readable YAML "
     "file; No such file or directory"),
    ("--config unknown.yaml", "invalid --config unknown.yaml: trainingInput.workerCont: unknown field "
     "'workerCont'; did you mean 'workerCount'?"),
    ("--config malformed.yaml", "invalid YAML in --config malformed.yaml at line 3, column 14: mapping values "
     "are not allowed here; check indentation and quoting"),
    ("--config float.yaml", "invalid --config float.yaml: trainingInput.runtimeVersion: expected a string; "
     "received the number 2.11; quote values such as '2.11' in YAML"),
    ("--config neither.yaml", "invalid --config neither.yaml: expected a top-level trainingInput: (legacy) or "
     "workerPoolSpecs: (Vertex AI) key; received keys: foo"),
    ("--config list.yaml", "invalid value for --config list.yaml: received 'list'; expected a YAML mapping "
     "(trainingInput: or workerPoolSpecs:)"),
    ("--config badenum.yaml", "invalid --config badenum.yaml: workerPoolSpecs[0].machineSpec.acceleratorType: "
     "invalid enum value 'NVIDIA_T4'; expected one of ACCELERATOR_TYPE_UNSPECIFIED, NVIDIA_TESLA_K80, "
     "NVIDIA_TESLA_P100, NVIDIA_TESLA_V100, NVIDIA_TESLA_P4, NVIDIA_TESLA_T4, NVIDIA_TESLA_A100, NVIDIA_A100_80GB, "
     "NVIDIA_L4, NVIDIA_H100_80GB, NVIDIA_H100_MEGA_80GB, NVIDIA_H200_141GB, NVIDIA_B200, NVIDIA_GB200, "
     "NVIDIA_RTX_PRO_6000, TPU_V2, TPU_V3, TPU_V4_POD, TPU_V5_LITEPOD; did you mean 'NVIDIA_L4'?"),
]


@pytest.fixture(scope="module")
def yaml_dir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("yaml")
    for name, text in YAML_FILES.items():
        (folder / name).write_text(text)
    return folder


@pytest.mark.parametrize("args, message", CASES, ids=[c[0][:60] for c in CASES])
def test_invalid_spec_is_one_line_exit_2_and_writes_nothing(args, message, yaml_dir, monkeypatch):
    monkeypatch.chdir(yaml_dir)
    output = yaml_dir / "out.yaml"
    result = CliRunner().invoke(app, ["config", *shlex.split(args), "-o", str(output)])
    assert result.exit_code == 2, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1, lines
    assert lines[0] == f"error: {message}"
    assert result.stdout == ""
    assert not output.exists() and not list(yaml_dir.glob(".out.yaml.*"))
