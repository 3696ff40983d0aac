"""What Google's table lists for each image beside its framework (pandas, scikit-learn, xgboost, cloudml-hypertune),
and which of it a job gets: the packages its package imports (mlsubmit.images.listed), in the request a carrier runs.
Fast: no environment is built (the job environments that install them: tests/test_images_trainers.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mlsubmit.cli import app
from mlsubmit.images import catalog, listed

ROOT = Path(__file__).resolve().parents[1]
PREBUILT = "us-docker.pkg.dev/vertex-ai/training/"


def _image(name: str) -> catalog.Image:
    found = catalog.find(name if "/" in name else f"{PREBUILT}{name}:latest")
    assert found is not None, name
    return found


@pytest.mark.parametrize("name, expected", [
    ("tf-cpu.2-17.py310", {"pandas": "2.2.3", "xgboost": "2.1.3", "cloudml-hypertune": "0.1.0.dev6"}),
    ("pytorch-gpu.2-4.py310", {"pandas": "2.2.3", "scikit-learn": "1.6.1", "cloudml-hypertune": "0.1.0.dev6"}),
    ("sklearn-cpu.1-6", {"pandas": "2.2.3", "scikit-learn": "1.6.1", "xgboost": "2.1.3",
                         "cloudml-hypertune": "0.1.0.dev6"}),
    ("tf-cpu.1-15", {"pandas": "0.24.2", "scikit-learn": "0.20.4", "xgboost": "0.82",
                     "cloudml-hypertune": "0.1.0.dev6"}),
    ("tf-cpu.2-3", {"pandas": "0.24.2", "scikit-learn": "0.20.4", "cloudml-hypertune": "0.1.0.dev6"}),
    ("tf-cpu.2-8", {"xgboost": "", "cloudml-hypertune": "0.1.0.dev6"}),
    # the public image that replaces the prebuilt TensorFlow images carries what the last of them listed
    ("tensorflow/tensorflow:2.21.0", {"pandas": "2.2.3", "xgboost": "2.1.3", "cloudml-hypertune": "0.1.0.dev6"}),
    ("tf-cpu.2-15.py310", {}),  # the page lists nothing beside TensorFlow for it: nothing is invented
])
def test_the_catalog_records_what_googles_table_lists_for_each_image(name, expected):
    assert dict(_image(name).listed) == expected
    assert {distribution for distribution, _ in _image(name).listed} <= set(listed.MODULES.values())


def test_what_counts_as_imported_is_every_import_the_package_cannot_run_without():
    source = (b"import os\nimport sklearn.linear_model\n"
              b"try:\n    import xgboost\nexcept ImportError:\n    xgboost = None\n"  # optional: runs without it
              b"def report():\n    from hypertune import HyperTune\n"  # inside a function: fails when called
              b"from . import pandas\n")  # the package's own module
    assert listed.imports([("trainer/model.py", source), ("trainer/bad.py", b"def (")]) == {
        "sklearn": "trainer/model.py, line 2", "hypertune": "trainer/model.py, line 8"}


def test_a_job_gets_the_listed_packages_it_imports_unless_its_image_or_its_own_requirement_provides_them():
    imported = {"pandas": "trainer/task.py, line 1", "sklearn": "trainer/task.py, line 2",
                "hypertune": "trainer/model.py, line 2"}
    sklearn = _image("sklearn-cpu.1-6")  # its environment carries scikit-learn itself
    assert [g.requirement for g in listed.given(sklearn, imported)] == ["pandas==2.2.3",
                                                                        "cloudml-hypertune==0.1.0.dev6"]
    # a requirement the listed version satisfies is resolved with it; one it does not replaces it, as pip did there
    assert [g.requirement for g in listed.given(sklearn, imported, ["pandas>=2"])][0] == "pandas==2.2.3"
    assert [g.requirement for g in listed.given(sklearn, imported, ["pandas==1.5.3"])] == [
        "cloudml-hypertune==0.1.0.dev6"]
    assert listed.given(_image("tf-cpu.2-15.py310"), imported) == []
    assert listed.given(None, imported) == []
    said = listed.said(listed.given(_image("tf-cpu.2-8"), {"xgboost": "t/m.py, line 3"}), {"xgboost": "1.6.2"})
    assert said == ("from the image's listed packages: xgboost 1.6.2 (t/m.py, line 3 imports xgboost; the table "
                    "names no version: pip's choice for the image)")


def test_the_replacement_images_container_command_installs_the_listed_packages_the_package_imports(tmp_path):
    """The request a carrier runs installs hypertune before the package, as the image it replaces had it; a package
    that imports none of the listed modules gets only what the carrier adds (TensorBoard)."""
    flags = ["train", "--dry-run", "--project", "p", "--region", "us-central1", "--staging-bucket", "gs://bkt"]

    def command(package: Path) -> str:
        shown = CliRunner().invoke(app, [*flags, "--package-path", str(package)])
        assert shown.exit_code == 0, shown.stderr
        body = json.loads(re.search(r"^\{.*?^\}$", shown.stdout, re.M | re.S).group(0))
        return body["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["command"][2]

    trainers = ROOT / "tests" / "fixtures" / "trainers"
    assert re.fullmatch(r"set -e; python -m pip install --no-cache-dir --disable-pip-version-check "
                        r"'tensorboard~=2\.21\.0' cloudml-hypertune==0\.1\.0\.dev6; python -m pip install "
                        r"--no-cache-dir --disable-pip-version-check /gcs/bkt/packages/\w+/trainer-0\.1\.tar\.gz; "
                        r'exec python -m trainer\.task "\$@"', command(trainers / "hypertune_in_model" / "trainer"))
    assert "'tensorboard~=2.21.0';" in command(trainers / "vertex_strict" / "trainer")
