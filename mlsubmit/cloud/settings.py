"""Where a cloud job goes: project, region, staging bucket and API endpoint, each from the first place that has it.

Precedence, highest first:
1. the command's flags (`--project`, `--region`, `--staging-bucket`, `--endpoint`);
2. the environment: `MLSUBMIT_PROJECT` then `CLOUDSDK_CORE_PROJECT`; `MLSUBMIT_REGION` then
   `CLOUDSDK_COMPUTE_REGION`; `MLSUBMIT_STAGING_BUCKET`; `MLSUBMIT_API_ENDPOINT`;
3. the active gcloud configuration file, if there is one: `$CLOUDSDK_CONFIG` (default `~/.config/gcloud`),
   its `active_config` (or `$CLOUDSDK_ACTIVE_CONFIG_NAME`) naming `configurations/config_<name>`, an INI file
   with `[core] project` and `[ai] region` / `[ai_platform] region` / `[compute] region`.

Reading settings never touches the network. A setting that is needed and found nowhere is one UsageError
saying which and how to set it.

Example:
    >>> resolve(project="p", region="us-central1").project
    'p'
"""

from __future__ import annotations

import configparser
import os
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path

from mlsubmit.errors import UsageError, invalid_value

_ENV = {"project": ("MLSUBMIT_PROJECT", "CLOUDSDK_CORE_PROJECT"),
        "region": ("MLSUBMIT_REGION", "CLOUDSDK_COMPUTE_REGION"),
        "staging_bucket": ("MLSUBMIT_STAGING_BUCKET",), "endpoint": ("MLSUBMIT_API_ENDPOINT",)}
# (section, key) in a gcloud configuration file, first found wins
_GCLOUD = {"project": (("core", "project"),), "region": (("ai", "region"), ("ai_platform", "region"),
                                                          ("compute", "region"))}
_FLAGS = {"project": "--project", "region": "--region", "staging_bucket": "--staging-bucket",
          "endpoint": "--endpoint"}
_PLACEHOLDER = {"project": "PROJECT", "region": "REGION", "staging_bucket": "gs://BUCKET"}
_HOW = {"project": "pass --project PROJECT, or export MLSUBMIT_PROJECT=PROJECT, or run "
                   "`gcloud config set project PROJECT`",
        "region": "pass --region REGION (e.g. us-central1), or export MLSUBMIT_REGION=REGION, or run "
                  "`gcloud config set compute/region REGION`",
        "staging_bucket": "pass --staging-bucket gs://BUCKET (or --job-dir gs://BUCKET/DIR), or export "
                          "MLSUBMIT_STAGING_BUCKET=gs://BUCKET; create one with `gcloud storage buckets create "
                          "gs://BUCKET --location REGION`"}


@dataclass(frozen=True)
class Settings:
    """Resolved settings (None where nothing set one) and where each came from ("--project", "env
    MLSUBMIT_PROJECT", "gcloud configuration 'default'")."""

    project: str | None = None
    region: str | None = None
    staging_bucket: str | None = None
    endpoint: str | None = None
    sources: dict[str, str] = field(default_factory=dict)

    def require(self, *names: str) -> "Settings":
        """Raise one UsageError naming every one of `names` that is not set (a user learns all in one run)."""
        missing = [name for name in names if not getattr(self, name)]
        if len(missing) == 1:
            raise UsageError(f"no {missing[0].replace('_', ' ')} set for the cloud job", hint=_HOW[missing[0]])
        if missing:
            words = [name.replace("_", " ") for name in missing]
            flags = ", ".join(f"{_FLAGS[name]} {_PLACEHOLDER[name]}" for name in missing)
            variables = ", ".join(f"{_ENV[name][0]}={_PLACEHOLDER[name]}" for name in missing)
            raise UsageError(f"no {', '.join(words[:-1])} or {words[-1]} set for the cloud job",
                             hint=f"pass {flags}, or export {variables}")
        return self

    def from_flag(self, name: str) -> bool:
        return self.sources.get(name, "").startswith("--")


def gcloud_config_dir() -> Path:
    return Path(os.environ.get("CLOUDSDK_CONFIG") or Path.home() / ".config" / "gcloud")


def gcloud_configuration() -> tuple[str, configparser.ConfigParser] | None:
    """(name, parsed file) of the active gcloud configuration, or None if there is none (or it is unreadable)."""
    folder = gcloud_config_dir()
    name = os.environ.get("CLOUDSDK_ACTIVE_CONFIG_NAME", "").strip()
    if not name:
        try:
            name = (folder / "active_config").read_text(encoding="utf-8").strip() or "default"
        except OSError:
            name = "default"
    parser = configparser.ConfigParser(interpolation=None)
    try:
        if not parser.read(folder / "configurations" / f"config_{name}", encoding="utf-8"):
            return None
    except configparser.Error:
        return None
    return name, parser


def check_endpoint(url: str, field_name: str = "--endpoint") -> str:
    """An API endpoint must be http(s)://HOST[:PORT] (googleapiclient needs the scheme)."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise invalid_value(field_name, url, "http(s)://HOST[:PORT] of the training-service API",
                            hint="for the emulator: --endpoint http://127.0.0.1:8090")
    return url.rstrip("/")


def normalise_bucket(value: str, field_name: str) -> str:
    """`bkt`, `gs://bkt` or `gs://bkt/prefix/` → `gs://bkt` / `gs://bkt/prefix`, the bucket name checked."""
    from mlsubmit.cloud.storage import split_gcs

    text = value.strip()
    if "://" in text and not text.startswith("gs://"):
        raise invalid_value(field_name, value, "gs://BUCKET[/PREFIX] (cloud jobs stage to Cloud Storage)")
    uri = (text if text.startswith("gs://") else f"gs://{text}").rstrip("/")
    try:
        split_gcs(uri)
    except UsageError as err:
        raise invalid_value(field_name, value, "gs://BUCKET[/PREFIX] with a valid bucket name", hint=err.hint) from None
    return uri


def resolve(*, project: str | None = None, region: str | None = None, staging_bucket: str | None = None,
            endpoint: str | None = None) -> Settings:
    """Settings from flags (the arguments), then the environment, then the active gcloud configuration."""
    given = {"project": project, "region": region, "staging_bucket": staging_bucket, "endpoint": endpoint}
    values: dict[str, str | None] = {}
    sources: dict[str, str] = {}
    configuration = None
    for name, flag_value in given.items():
        value, source = flag_value, _FLAGS[name]
        for variable in _ENV[name]:
            if value:
                break
            value, source = os.environ.get(variable, "").strip() or None, f"env {variable}"
        if not value and name in _GCLOUD:
            configuration = configuration or gcloud_configuration() or ("", None)
            config_name, parser = configuration
            for section, key in _GCLOUD[name] if parser is not None else ():
                value = parser.get(section, key, fallback="").strip() or None
                source = f"gcloud configuration {config_name!r} ([{section}] {key})"
                if value:
                    break
        if value:
            values[name], sources[name] = value, source
    if values.get("endpoint"):
        values["endpoint"] = check_endpoint(values["endpoint"], sources["endpoint"].replace("env ", ""))
    if values.get("staging_bucket"):
        values["staging_bucket"] = normalise_bucket(values["staging_bucket"],
                                                    sources["staging_bucket"].replace("env ", ""))
    return Settings(**values, sources=sources)
