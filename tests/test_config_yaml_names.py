"""#21 honest messages: a bad value read from `--config` is named by its YAML field, never by a flag the user did not
pass; a flag that overrides the YAML is named as the flag."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from mlsubmit.cli import app

LEGACY = "trainingInput:\n  scaleTier: CUSTOM\n  masterType: n1-standard-4\n"
VERTEX = ("workerPoolSpecs:\n  - machineSpec:\n      machineType: n1-standard-4\n    replicaCount: 1\n"
          "    pythonPackageSpec:\n      executorImageUri: us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-17.py310:latest\n"
          "      packageUris: [gs://b/p.tar.gz]\n      pythonModule: {module}\n")


@pytest.mark.parametrize("document, flags, expected", [
    (LEGACY + "  region: mars-central1\n", (), "invalid value for trainingInput.region: received 'mars-central1'"),
    (LEGACY + "  runtimeVersion: '9.9'\n", (), "invalid value for trainingInput.runtimeVersion: received '9.9'; "),
    (LEGACY + "  pythonModule: 'a b'\n", (), "invalid value for trainingInput.pythonModule: received 'a b'"),
    (LEGACY + "  jobDir: /local/x\n", (), "invalid value for trainingInput.jobDir: received '/local/x'"),
    ("trainingInput:\n  scaleTier: BASIC\n  workerCount: 2\n", (),
     "invalid value for trainingInput.workerCount: machine types and counts are only allowed with "
     "trainingInput.scaleTier: CUSTOM; received trainingInput.scaleTier: BASIC"),
    (VERTEX.format(module="'a b'"), (),
     "invalid value for workerPoolSpecs[0].pythonPackageSpec.pythonModule: received 'a b'"),
    (LEGACY + "  region: us-central1\n", ("--region", "mars-central1"),
     "invalid value for --region: received 'mars-central1'"),
    (LEGACY + "  workerCount: 2\n  workerType: n1-standard-4\n", ("--worker-machine-type", "n1-nope-4"),
     "--worker-machine-type"),
])
def test_a_bad_value_is_named_where_the_user_wrote_it(tmp_path, document, flags, expected):
    config = tmp_path / "config.yaml"
    config.write_text(document)
    result = CliRunner().invoke(app, ["config", "--config", str(config), *flags])
    assert result.exit_code == 2, result.output
    line = result.output.strip().splitlines()[-1]
    assert expected in line, line
    if not flags:
        assert " --" not in line.split(";")[0], line  # no flag in the part that names the value
