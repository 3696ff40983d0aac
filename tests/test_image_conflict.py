"""A conflict with the image is named only when it is one: pip's ResolutionImpossible read against the ranges
(mlsubmit.images.conflict), and, where they overlap, the requirement's true cause found by asking the index."""

from __future__ import annotations

from pathlib import Path

import pytest

from mlsubmit.images import catalog
from mlsubmit.images.conflict import conflict, requested, satisfiable
from mlsubmit.images.envs import Carried

TF28_PY37 = catalog.tensorflow_image("2.8", "cpu", python="3.7")
TF28 = (Carried("tensorflow-cpu", "2.8.4", ("numpy>=1.20", "termcolor>=1.1.0", "protobuf>=3.9.2")),)
TF24 = (Carried("tensorflow-cpu", "2.4.4", ("numpy~=1.19.2", "termcolor~=1.1.0")),)


def _said(*causes: str) -> str:
    """pip's own text for a ResolutionImpossible (pip/_internal/resolution/resolvelib/factory.py)."""
    return ("ERROR: Cannot install the requested packages because these package versions have conflicting "
            "dependencies.\n\nThe conflict is caused by:\n" + "".join(f"    {line}\n" for line in causes) +
            "\nTo fix this you could try to:\n1. loosen the range of package versions you've specified\n")


@pytest.mark.parametrize("asked, held, meet", [
    ("numpy==1.22.3", ["numpy>=1.20", "numpy<1.24,>=1.20"], True),
    ("termcolor~=1.1.0", ["termcolor~=1.1.0"], True),
    ("tensorflow==2.8.0", ["tensorflow==2.8.*"], True),
    ("protobuf<5", ["protobuf<8.0.0,>=6.31.1"], False),
    ("tensorboard>=2.21", ["tensorboard<2.18,>=2.17"], False),
    ("numpy==1.25.0", ["numpy>=1.20", "numpy<1.24,>=1.20"], False),
    ("keras>2.8", ["keras<2.9,>=2.8"], True),  # 2.8.0.1
    ("numpy!=1.20.0", ["numpy==1.*", "numpy>=1.20"], True),
    ("numpy<1.20", ["numpy<1.24"], True),
])
def test_ranges_overlap_when_one_version_satisfies_both(asked, held, meet):
    assert satisfiable([asked, *held]) is meet


def test_a_pin_the_images_range_holds_is_not_a_conflict():
    """numpy 1.22.3 satisfies tensorflow-cpu 2.8.4's numpy>=1.20 and the table's <1.24: pip's conflict there is about
    something else (no release for Python 3.7), so no line names the image, and the package's pin is the suspect."""
    said = _said("The user requested numpy==1.22.3", "The user requested (constraint) numpy<1.24,>=1.20")
    assert conflict(said, ["numpy==1.22.3"], TF28_PY37.name, TF28) is None
    assert requested(said, ["numpy==1.22.3", "tabulate"]) == ["numpy==1.22.3"]
    same = _said("The user requested termcolor~=1.1.0", "The user requested (constraint) termcolor~=1.1.0")
    assert conflict(same, ["termcolor~=1.1.0"], "tf-cpu.2-4", TF24) is None


def test_a_real_conflict_names_both_ranges_and_the_one_of_the_images_that_excludes_it():
    said = _said("The user requested numpy==1.25.0", "The user requested (constraint) numpy<1.24,>=1.20")
    # tensorflow-cpu's numpy>=1.20 allows 1.25.0: the image's pins are what exclude it, and are named
    assert conflict(said, ["numpy==1.25.0"], TF28_PY37.name, TF28) == (
        "requirement numpy==1.25.0 would replace the image's numpy: tf-cpu.2-8 holds it to numpy<1.24,>=1.20 (the "
        "image's pins)")
    carried = _said("The user requested tensorflow-cpu==2.8.3",
                    "The user requested (constraint) tensorflow-cpu==2.8.4")
    assert conflict(carried, ["tensorflow-cpu==2.8.3"], TF28_PY37.name, TF28) == (
        "requirement tensorflow-cpu==2.8.3 would replace the image's tensorflow-cpu: tf-cpu.2-8 carries "
        "tensorflow-cpu 2.8.4")


def test_a_dependency_of_a_requirement_that_conflicts_names_both_sides():
    carried = (Carried("tensorflow-cpu", "2.17.1", ("tensorboard<2.18,>=2.17", "numpy<2.0.0,>=1.23.5")),)
    said = _said("tb-plugin 9.0 depends on tensorboard>=2.21",
                 "The user requested (constraint) tensorboard<2.18,>=2.17")
    assert conflict(said, ["tb-plugin==9.0"], "tf-cpu.2-17.py310", carried) == (
        "tb-plugin 9.0 (from the package's requirements) needs tensorboard>=2.21: tf-cpu.2-17.py310 carries "
        "tensorflow-cpu 2.17.1, which requires tensorboard<2.18,>=2.17")
    unrelated = _said("tb-plugin 9.0 depends on promise>=2.21")  # not the image's: the caller warns
    assert conflict(unrelated, ["tb-plugin==9.0"], "tf-cpu.2-17.py310", carried) is None
    overlapping = _said("tb-plugin 9.0 depends on tensorboard>=2.17",
                        "The user requested (constraint) tensorboard<2.18,>=2.17")
    assert conflict(overlapping, ["tb-plugin==9.0"], "tf-cpu.2-17.py310", carried) is None


CHECK = """\
import json, pip
from mlsubmit.errors import UsageError
from mlsubmit.images import catalog, check
said = {"pip": pip.__version__}
for requirement, image in (("numpy==1.22.3", catalog.tensorflow_image("2.8", "cpu", python="3.7")),
                           ("termcolor~=1.1.0", catalog.tensorflow_image("2.4", "cpu", python="3.7"))):
    try:
        said[requirement] = check.resolve([requirement], image)[1]
    except UsageError as err:
        said[requirement] = "refused: " + err.message
print(json.dumps(said))
"""


def test_with_the_pip_of_python3_m_venv_a_pin_in_the_images_range_is_said_by_its_true_cause(tmp_path):
    """pip 23 (what `python3 -m venv` gives) names no "no matching distributions" in a conflict: numpy 1.22.3 on
    tf-cpu.2-8 (Python 3.7; the image holds numpy to >=1.20,<1.24) and termcolor ~=1.1.0 on tf-cpu.2-4 (tensorflow-cpu
    2.4.4 requires ~=1.1.0) were refused as "would replace the image's ...". Through pip 23 and the index (network):
    the first has no release for Python 3.7, the second only a source distribution."""
    import json
    import subprocess
    import sys
    import sysconfig

    venv = tmp_path / "venv"
    subprocess.run([getattr(sys, "_base_executable", sys.executable), "-m", "venv", str(venv)], check=True,
                   timeout=300)
    python = venv / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    # mlsubmit and its dependencies, after the venv's own pip
    (Path(site) / "00-deps.pth").write_text(f"import site; site.addsitedir({sysconfig.get_paths()['purelib']!r})\n")
    done = subprocess.run([str(python), "-c", CHECK], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    said = json.loads(done.stdout.strip().splitlines()[-1])
    if not said["pip"].startswith("23."):
        pytest.skip(f"this Python's ensurepip gives pip {said['pip']}, not pip 23")
    assert said["numpy==1.22.3"].startswith("refused: requirement numpy==1.22.3 has no release for Python 3.7, which "
                                            "tf-cpu.2-8 runs"), said
    (warning,) = said["termcolor~=1.1.0"]
    assert warning.startswith("termcolor~=1.1.0 has no wheel for Python 3.7, only a source distribution: pip builds "
                              "it from source at every start of the job on tf-cpu.2-4"), said
