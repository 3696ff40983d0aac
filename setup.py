"""The trainer's own distribution, as gcloud and Vertex AI expect it next to the package.

`python setup.py sdist` here builds the package that runs on the training machine (`python -m trainer.task`).
The runtime image already carries TensorFlow and Keras; REQUIRED_PACKAGES lists what the trainer needs on
top of it. `mlsubmit package` reads this file's NAME, VERSION and REQUIRED_PACKAGES without executing it.

The tool itself (`pip install -e .`) is built from pyproject.toml by hatchling, which never runs this file.
"""

from setuptools import find_packages, setup

NAME = "trainer"
VERSION = "0.1.0"
# Supported images: TensorFlow 2.16 and 2.17 (Keras 3 and tf-keras; checked against each with pip's resolver by
# `mlsubmit train`'s pre-flight). No requirement may lift a package the image's TensorFlow pins (tensorboard 2.21
# would replace the 2.17 image's tensorboard 2.17 and protobuf 4 and break TensorFlow 2.17).
REQUIRED_PACKAGES = [
    "mlsubmit-runtime",  # staged beside this package by mlsubmit (multi_gpu_model, artifacts, emulated devices)
    "h5py>=3.10",
    "google-cloud-storage>=2.16",
    "matplotlib>=3.8",
    "tensorboard>=2.16",
    "keras>=3",
    "tf-keras>=2.16",
    "cloudml-hypertune",  # every epoch's metrics reported for tuning jobs (mlsubmit_runtime.hypertune uses it)
]

if __name__ == "__main__":
    setup(
        name=NAME,
        version=VERSION,
        install_requires=REQUIRED_PACKAGES,
        packages=find_packages(include=["trainer", "trainer.*"]),
        include_package_data=True,
        description="mlsubmit trainer: a Keras template trained data-parallel on every GPU.",
        python_requires=">=3.10",
    )
