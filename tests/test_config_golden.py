"""configs/ holds the tool's own output: regenerated here and compared byte for byte, and schema-checked."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from mlsubmit.images import carried

from mlsubmit.jobspec import configs_gen
from mlsubmit.jobspec.discovery import validate

CONFIGS = Path(__file__).resolve().parent.parent / "configs"
SCHEMAS = {"vertex": ("aiplatform.v1", "GoogleCloudAiplatformV1CustomJobSpec"),
           "legacy": ("ml.v1", "GoogleCloudMlV1__Job")}


def test_configs_regenerate_byte_for_byte(tmp_path):
    written = configs_gen.generate(tmp_path)
    assert sorted(p.name for p in written) == sorted(p.name for p in CONFIGS.glob("*.yaml")), \
        "configs/ has stale or missing files: run python -m mlsubmit.jobspec.configs_gen"
    for path in written:
        assert path.read_bytes() == (CONFIGS / path.name).read_bytes(), \
            f"configs/{path.name} differs from the tool's output: run python -m mlsubmit.jobspec.configs_gen"


@pytest.mark.parametrize("path", sorted(CONFIGS.glob("*.yaml")), ids=lambda p: p.name)
def test_every_config_validates_against_the_discovery_schema(path):
    api, schema = SCHEMAS[path.name.split(".")[-2]]
    document = yaml.safe_load(path.read_text())
    if "studySpec" in document:
        schema = "GoogleCloudAiplatformV1HyperparameterTuningJob"
    assert validate(api, schema, document) == []


def test_a_config_equals_what_the_installed_command_prints():
    """The first comment line is the command; running it in a real process prints the rest of the file."""
    path = CONFIGS / "custom_4gpu.vertex.yaml"
    header, _, body = path.read_text().partition("\n# Generated")
    args = header.removeprefix("# mlsubmit config ").split()
    result = subprocess.run([sys.executable, "-m", "mlsubmit", "config", *args], capture_output=True, text=True,
                            check=True)
    assert result.stdout == body.split("\n", 1)[1]
    assert result.stderr.startswith("cost estimate (")  # stderr holds the cost estimate (#24) and nothing else
    assert all(line.startswith("  ") for line in result.stderr.splitlines()[1:])


@pytest.mark.parametrize("path", sorted(CONFIGS.glob("*.vertex.yaml")), ids=lambda p: p.name)
def test_vertex_configs_pass_the_job_dir_as_base_output_directory_never_as_an_argument(path):
    document = yaml.safe_load(path.read_text())
    document = document.get("trialJobSpec", document)  # a tuning job's trials run this CustomJobSpec
    assert document["baseOutputDirectory"]["outputUriPrefix"].startswith("gs://")
    args = [a for pool in document["workerPoolSpecs"] if pool for a in carried.program(pool).get("args", [])]
    assert not any(a.startswith("--job-dir") for a in args)
