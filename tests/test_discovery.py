"""The discovery-document validator, checked against documents that must pass and hand-made ones that must fail."""

from __future__ import annotations

import time

import pytest

from mlsubmit.jobspec.discovery import Violation, schemas, validate

GOOD_TRAINING_INPUT = {
    "scaleTier": "CUSTOM", "masterType": "n1-standard-16",
    "masterConfig": {"acceleratorConfig": {"count": "4", "type": "NVIDIA_TESLA_T4"}},
    "workerCount": "2", "workerType": "n1-standard-16", "region": "us-central1", "runtimeVersion": "2.11",
    "pythonModule": "trainer.task", "args": ["--epochs", "3"], "jobDir": "gs://b/x",
    "scheduling": {"maxRunningTime": "7200s"},
}
GOOD_CUSTOM_JOB = {
    "displayName": "run 1", "labels": {"team": "ml"},
    "jobSpec": {"workerPoolSpecs": [
        {"machineSpec": {"machineType": "n1-standard-8", "acceleratorType": "NVIDIA_TESLA_T4", "acceleratorCount": 2},
         "replicaCount": "1", "pythonPackageSpec": {"executorImageUri": "img", "packageUris": ["gs://b/p.tar.gz"],
                                                    "pythonModule": "trainer.task"}},
        {}, {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "2"}],
        "baseOutputDirectory": {"outputUriPrefix": "gs://b/x"}, "scheduling": {"timeout": "3600.5s"}},
}


def test_valid_documents_have_no_violations():
    assert validate("ml.v1", "GoogleCloudMlV1__TrainingInput", GOOD_TRAINING_INPUT) == []
    assert validate("ml.v1", "GoogleCloudMlV1__Job", {"jobId": "j1", "trainingInput": GOOD_TRAINING_INPUT}) == []
    assert validate("aiplatform.v1", "GoogleCloudAiplatformV1CustomJob", GOOD_CUSTOM_JOB) == []
    assert validate("logging.v2", "LogEntry", {"severity": "ERROR", "textPayload": "x",
                                               "timestamp": "2024-01-02T03:04:05.123Z",
                                               "jsonPayload": {"any": ["thing", 1]}}) == []


@pytest.mark.parametrize("api, schema, document, expected", [
    ("ml.v1", "GoogleCloudMlV1__TrainingInput", {"workerCont": "2"},
     [Violation("workerCont", "unknown field 'workerCont'; did you mean 'workerCount'?")]),
    ("ml.v1", "GoogleCloudMlV1__TrainingInput", {"scaleTier": "HUGE"},
     [Violation("scaleTier", "invalid enum value 'HUGE'; expected one of BASIC, STANDARD_1, PREMIUM_1, BASIC_GPU, "
                "BASIC_TPU, CUSTOM")]),
    ("ml.v1", "GoogleCloudMlV1__TrainingInput", {"workerCount": 4},
     [Violation("workerCount", "expected an int64 as a decimal string; received the number 4")]),
    ("ml.v1", "GoogleCloudMlV1__TrainingInput", {"workerCount": "4.0"},
     [Violation("workerCount", "expected an int64 as a decimal string; received '4.0'")]),
    ("ml.v1", "GoogleCloudMlV1__TrainingInput", {"masterConfig": {"acceleratorConfig": {"count": True}}},
     [Violation("masterConfig.acceleratorConfig.count", "expected an int64 as a decimal string; received true")]),
    ("ml.v1", "GoogleCloudMlV1__TrainingInput", {"args": ["a", 3], "packageUris": "gs://b/p"},
     [Violation("args[1]", "expected a string; received the number 3"),
      Violation("packageUris", "expected an array; received 'gs://b/p'")]),
    ("ml.v1", "GoogleCloudMlV1__TrainingInput", {"scheduling": {"maxRunningTime": "2h", "priority": "1"}},
     [Violation("scheduling.maxRunningTime", "expected a duration in seconds such as '3600s'; received '2h'"),
      Violation("scheduling.priority", "expected an integer (int32); received '1'")]),
    ("aiplatform.v1", "GoogleCloudAiplatformV1CustomJob", {"labels": {"a": 1}, "jobSpec": []},
     [Violation('labels["a"]', "expected a string; received the number 1"),
      Violation("jobSpec", "expected an object; received an array")]),
    ("aiplatform.v1", "GoogleCloudAiplatformV1CustomJobSpec",
     {"workerPoolSpecs": [{"machineSpec": {"acceleratorCount": 2 ** 31}, "replicaCount": "1",
                           "pythonPackageSpec": {"pythonModul": "x"}}]},
     [Violation("workerPoolSpecs[0].machineSpec.acceleratorCount",
                "2147483648 is out of range for int32 (-2147483648..2147483647)"),
      Violation("workerPoolSpecs[0].pythonPackageSpec.pythonModul",
                "unknown field 'pythonModul'; did you mean 'pythonModule'?")]),
    ("aiplatform.v1", "GoogleCloudAiplatformV1CustomJobSpec", {"enableWebAccess": "yes"},
     [Violation("enableWebAccess", "expected true or false; received 'yes'")]),
    ("logging.v2", "LogEntry", {"severity": "LOUD", "timestamp": "yesterday"},
     [Violation("severity", "invalid enum value 'LOUD'; expected one of DEFAULT, DEBUG, INFO, NOTICE, WARNING, "
                "ERROR, CRITICAL, ALERT, EMERGENCY"),
      Violation("timestamp", "expected an RFC 3339 timestamp; received 'yesterday'")]),
])
def test_bad_documents_are_caught(api, schema, document, expected):
    assert validate(api, schema, document) == expected


def test_lenient_numbers_accept_what_proto3_json_parsers_accept():
    document = {"workerPoolSpecs": [{"replicaCount": 2, "machineSpec": {"acceleratorCount": "4"}}]}
    assert len(validate("aiplatform.v1", "GoogleCloudAiplatformV1CustomJobSpec", document)) == 2
    assert validate("aiplatform.v1", "GoogleCloudAiplatformV1CustomJobSpec", document, lenient_numbers=True) == []


def test_unknown_api_or_schema_is_a_programming_error():
    with pytest.raises(ValueError, match="unknown api"):
        validate("ml.v2", "X", {})
    with pytest.raises(ValueError, match="has no schema"):
        validate("ml.v1", "NoSuchSchema", {})


def test_fast_enough_for_an_emulator():
    schemas("aiplatform.v1")  # parsed once per process
    start = time.perf_counter()
    for _ in range(1000):
        assert validate("aiplatform.v1", "GoogleCloudAiplatformV1CustomJob", GOOD_CUSTOM_JOB) == []
    assert time.perf_counter() - start < 2.0  # ~0.1 ms each on the 2-core machine
