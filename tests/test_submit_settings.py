"""Where a cloud job goes: flags, then the environment, then the active gcloud configuration file; a setting
found nowhere is one line saying which and how to set it."""

from __future__ import annotations

import pytest

from mlsubmit.errors import UsageError
from mlsubmit.cloud.settings import resolve

VARIABLES = ("MLSUBMIT_PROJECT", "CLOUDSDK_CORE_PROJECT", "MLSUBMIT_REGION", "CLOUDSDK_COMPUTE_REGION",
             "MLSUBMIT_STAGING_BUCKET", "MLSUBMIT_API_ENDPOINT", "CLOUDSDK_ACTIVE_CONFIG_NAME")


@pytest.fixture
def gcloud(tmp_path, monkeypatch):
    """A gcloud configuration directory with two configurations, `work` active."""
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)
    folder = tmp_path / "gcloud"
    (folder / "configurations").mkdir(parents=True)
    (folder / "active_config").write_text("work\n")
    (folder / "configurations" / "config_work").write_text(
        "[core]\naccount = me@example.com\nproject = from-gcloud\n\n[compute]\nregion = europe-west4\n")
    (folder / "configurations" / "config_other").write_text("[core]\nproject = other-project\n\n"
                                                             "[ai]\nregion = asia-east1\n")
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(folder))
    return folder


def test_the_active_gcloud_configuration_is_the_last_resort(gcloud):
    settings = resolve()
    assert (settings.project, settings.region) == ("from-gcloud", "europe-west4")
    assert settings.sources["project"] == "gcloud configuration 'work' ([core] project)"


def test_environment_beats_gcloud_and_flags_beat_both(gcloud, monkeypatch):
    monkeypatch.setenv("CLOUDSDK_CORE_PROJECT", "cloudsdk-project")
    monkeypatch.setenv("CLOUDSDK_COMPUTE_REGION", "us-east1")
    assert (resolve().project, resolve().region) == ("cloudsdk-project", "us-east1")
    monkeypatch.setenv("MLSUBMIT_PROJECT", "mlsubmit-project")
    monkeypatch.setenv("MLSUBMIT_STAGING_BUCKET", "my-bucket/staging/")
    settings = resolve()
    assert settings.project == "mlsubmit-project" and settings.staging_bucket == "gs://my-bucket/staging"
    settings = resolve(project="flag-project", region="us-west1", endpoint="http://127.0.0.1:8090/")
    assert (settings.project, settings.region, settings.endpoint) == ("flag-project", "us-west1",
                                                                      "http://127.0.0.1:8090")
    assert settings.from_flag("project") and not settings.from_flag("staging_bucket")


def test_the_configuration_named_in_the_environment_wins_and_ai_region_comes_first(gcloud, monkeypatch):
    monkeypatch.setenv("CLOUDSDK_ACTIVE_CONFIG_NAME", "other")
    settings = resolve()
    assert (settings.project, settings.region) == ("other-project", "asia-east1")


def test_missing_settings_say_which_and_how(gcloud):
    (gcloud / "active_config").write_text("absent")
    settings = resolve()
    with pytest.raises(UsageError) as missing:
        settings.require("project")
    assert missing.value.one_line() == ("no project set for the cloud job; pass --project PROJECT, or export "
                                        "MLSUBMIT_PROJECT=PROJECT, or run `gcloud config set project PROJECT`")
    with pytest.raises(UsageError) as missing:
        resolve(project="p", region="us-central1").require("project", "region", "staging_bucket")
    assert "gcloud storage buckets create gs://BUCKET" in missing.value.one_line()


@pytest.mark.parametrize("kwargs, says", [
    ({"endpoint": "127.0.0.1:8090"}, "invalid value for --endpoint: received '127.0.0.1:8090'"),
    ({"staging_bucket": "gs://UPPER"}, "invalid value for --staging-bucket: received 'gs://UPPER'"),
])
def test_malformed_values_are_refused(gcloud, kwargs, says):
    with pytest.raises(UsageError, match=says):
        resolve(**kwargs)
