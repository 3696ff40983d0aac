"""gcloud's training flags that mlsubmit does not take, each with what to use instead (one table).

mlsubmit accepts gcloud's own names for what it does (`--module-name`, `--scale-tier`, `--labels`,
`--worker-count`, `--packages`, … are declared beside mlsubmit's names where the options are defined). The flags
below — from `gcloud ai-platform jobs submit training`, `gcloud ai custom-jobs create|local-run` and
`gcloud ai-platform local train` (gcloud 528) — ask for something mlsubmit does not do: each is refused in one
line naming it and the way to get there, rather than click's bare "No such option".
"""

from __future__ import annotations

_CONTAINERS = ("custom containers are not supported (mlsubmit runs Python packages on prebuilt images)",
               "use --executor-image with a prebuilt training image, or submit the container with gcloud")
_KMS = ("customer-managed encryption keys are not supported", "submit with gcloud ai custom-jobs create --kms-key")
_ACCELERATOR = ("accelerators are given as a count and a type", "use --gpus N --gpu-type TYPE (workers get the "
                "chief's machine unless --worker-machine-type)")

UNSUPPORTED: dict[str, tuple[str, str]] = {
    "--master-image-uri": _CONTAINERS,
    "--worker-image-uri": _CONTAINERS,
    "--parameter-server-image-uri": _CONTAINERS,
    "--container-image-uri": _CONTAINERS,
    "--output-image-uri": _CONTAINERS,
    "--base-image": _CONTAINERS,
    "--use-chief-in-tf-config": ("TF_CONFIG already names the chief as each service does",
                                 "drop it: --api vertex says 'chief', --api legacy 'master'"),
    "--kms-key": _KMS, "--kms-keyring": _KMS, "--kms-location": _KMS, "--kms-project": _KMS,
    "--enable-web-access": ("interactive shells into the job are not supported", "drop it"),
    "--enable-dashboard-access": ("interactive dashboards are not supported", "drop it"),
    "--service-account": ("running the job as another service account is not supported",
                          "submit with gcloud ai custom-jobs create --service-account"),
    "--network": ("VPC peering is not supported", "submit with gcloud ai custom-jobs create --network"),
    "--persistent-resource-id": ("persistent resources are not supported", "drop it"),
    "--worker-pool-spec": ("worker pools are described by mlsubmit's spec flags",
                           "use --machine-type, --gpus, --workers, --ps, or --config with a workerPoolSpecs YAML"),
    "--master-accelerator": _ACCELERATOR,
    "--worker-accelerator": _ACCELERATOR,
    "--parameter-server-accelerator": _ACCELERATOR,
    "--args": ("trainer arguments are not a flag", "put them after --: mlsubmit train … -- --epochs 5"),
    "--command": ("commands in place of a Python module are not supported", "use --module-name"),
    "--script": ("scripts in place of a Python module are not supported", "use --module-name"),
    "--local-package-path": ("mlsubmit takes the package directory itself",
                             "use --package-path DIR/trainer (the folder holding __init__.py)"),
    "--extra-dirs": ("extra directories are not staged", "put the files in the package, or use --extra-packages"),
    "--service-account-key-file": ("local runs use your own environment's credentials", "drop it"),
    "--gpu": ("local runs use this machine's GPUs, or emulate them", "use --gpus N"),
    "--distributed": ("the cluster shape is given by counts",
                      "use --workers N --ps N (gcloud's --distributed meant --workers 2 --ps 2)"),
}


def unsupported(args: list[str]) -> tuple[str, str, str] | None:
    """(flag, why, instead) for the first unsupported gcloud flag among command-line `args`, else None."""
    for arg in args:
        name = arg.split("=", 1)[0]
        if name in UNSUPPORTED:
            return (name, *UNSUPPORTED[name])
    return None
