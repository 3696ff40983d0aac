"""TuningSpec (+ JobSpec) -> tuning documents, and back: pure functions, no network, no printing.

Forward: `vertex_tuning_job` (a HyperparameterTuningJob, what `gcloud ai hp-tuning-jobs create --config` reads:
studySpec + trial counts + trialJobSpec = the CustomJobSpec), `legacy_hyperparameters` (trainingInput.hyperparameters)
and `config_document`, which picks one by format and returns the notes a user should see.
Backward: `from_legacy` and `from_vertex` read either API's spec into a TuningSpec and name what has no equivalent.
`read_file` finds the tuning spec in a YAML file (`--hptune-config` or `--config`).

Mapping (legacy -> Vertex AI): hyperparameterMetricTag -> studySpec.metrics[0].metricId (default
training/hptuning/metric) with the goal; params -> studySpec.parameters with doubleValueSpec / integerValueSpec
(int64 bounds as strings) / categoricalValueSpec / discreteValueSpec and scaleType (NONE: left out); maxTrials,
maxParallelTrials, maxFailedTrials -> maxTrialCount, parallelTrialCount, maxFailedTrialCount; algorithm as is;
enableTrialEarlyStopping -> studySpec.decayCurveStoppingSpec; resumePreviousJobId has no Vertex AI equivalent.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mlsubmit.jobspec import drafts, requests
from mlsubmit.errors import UsageError, invalid_value
from mlsubmit.jobspec.spec import JobSpec
from mlsubmit.tuning.spec import DEFAULT_METRIC, Parameter, TuningSpec

VERTEX_KEYS = ("maxTrialCount", "parallelTrialCount", "maxFailedTrialCount")
LEGACY_KEYS = ("maxTrials", "maxParallelTrials", "maxFailedTrials")
_VALUE_SPECS = {"doubleValueSpec": "DOUBLE", "integerValueSpec": "INTEGER", "categoricalValueSpec": "CATEGORICAL",
                "discreteValueSpec": "DISCRETE"}
_METRIC_SOURCE = ("Vertex AI reads the metric only from what the trainer reports with cloudml-hypertune; legacy "
                  "AI Platform also read TensorFlow summaries tagged {metric}")
HP_COMMAND = "gcloud ai hp-tuning-jobs create"


# -- backward: documents -> TuningSpec -------------------------------------------------------------------------
def from_legacy(spec: dict[str, Any], where: str = "trainingInput.hyperparameters") -> tuple[TuningSpec, list[str]]:
    """A legacy HyperparameterSpec as a TuningSpec, and notes on what Vertex AI has no equivalent for."""
    params = []
    for index, param in enumerate(spec.get("params") or ()):
        kind = param.get("type")
        scale = param.get("scaleType")
        values = param.get("categoricalValues") if kind == "CATEGORICAL" else param.get("discreteValues")
        params.append(Parameter(param.get("parameterName"), kind, param.get("minValue"), param.get("maxValue"),
                                tuple(values or ()), None if scale in (None, "NONE") else scale,
                                where=f"{where}.params[{index}]", api="legacy"))
    tuning = TuningSpec(goal=spec.get("goal"), params=tuple(params),
                        metric=spec.get("hyperparameterMetricTag") or DEFAULT_METRIC,
                        max_trials=spec.get("maxTrials", 1), parallel_trials=spec.get("maxParallelTrials", 1),
                        max_failed_trials=spec.get("maxFailedTrials") or None,
                        algorithm=spec.get("algorithm") or "ALGORITHM_UNSPECIFIED",
                        early_stopping=bool(spec.get("enableTrialEarlyStopping")),
                        resume_previous_job_id=spec.get("resumePreviousJobId") or None, where=where,
                        keys=tuple(f"{where}.{key}" for key in LEGACY_KEYS))
    return tuning, tuning.fixed()


def from_vertex(job: dict[str, Any]) -> tuple[TuningSpec, list[str]]:
    """A Vertex HyperparameterTuningJob (its studySpec and counts) as a TuningSpec, and what has no place in one."""
    study = job.get("studySpec") or {}
    metrics = study.get("metrics") or []
    if len(metrics) != 1:
        raise invalid_value("studySpec.metrics", f"{len(metrics)} metrics", "exactly one metric (legacy "
                            "AI Platform and mlsubmit tune one)")
    notes = _unmapped(metrics[0], "studySpec.metrics[0].", {"metricId", "goal"})
    params = []
    for index, param in enumerate(study.get("parameters") or ()):
        where = f"studySpec.parameters[{index}]"
        given = [key for key in _VALUE_SPECS if param.get(key) is not None]
        if len(given) != 1:
            raise invalid_value(f"{where} ({param.get('parameterId')})", ", ".join(given) or "no value spec",
                                "exactly one of " + ", ".join(_VALUE_SPECS))
        value_spec = param[given[0]]
        notes += _unmapped(param, f"{where}.", {"parameterId", "scaleType", given[0]})
        notes += _unmapped(value_spec, f"{where}.{given[0]}.", {"minValue", "maxValue", "values"})
        scale = param.get("scaleType")
        params.append(Parameter(param.get("parameterId"), _VALUE_SPECS[given[0]], value_spec.get("minValue"),
                                value_spec.get("maxValue"), tuple(value_spec.get("values") or ()),
                                None if scale in (None, "SCALE_TYPE_UNSPECIFIED") else scale, where=where,
                                api="vertex"))
    notes += _unmapped(study, "studySpec.", {"metrics", "parameters", "algorithm", "decayCurveStoppingSpec",
                                             "medianAutomatedStoppingSpec"})
    notes += [f"studySpec.{key}.useElapsedDuration: legacy early stopping had no such setting; not mapped"
              for key in ("decayCurveStoppingSpec", "medianAutomatedStoppingSpec")
              if (study.get(key) or {}).get("useElapsedDuration")]
    if study.get("medianAutomatedStoppingSpec") is not None:
        notes.append("studySpec.medianAutomatedStoppingSpec: legacy AI Platform had one early-stopping switch "
                     "(enableTrialEarlyStopping); mapped to it")
    tuning = TuningSpec(goal=metrics[0].get("goal"), metric=metrics[0].get("metricId"), params=tuple(params),
                        max_trials=job.get("maxTrialCount", 1), parallel_trials=job.get("parallelTrialCount", 1),
                        max_failed_trials=job.get("maxFailedTrialCount") or None,
                        algorithm=study.get("algorithm") or "ALGORITHM_UNSPECIFIED",
                        early_stopping=study.get("decayCurveStoppingSpec") is not None
                        or study.get("medianAutomatedStoppingSpec") is not None,
                        where="studySpec", keys=VERTEX_KEYS)
    return tuning, notes + tuning.fixed()


# -- forward: TuningSpec -> documents --------------------------------------------------------------------------
def study_spec(tuning: TuningSpec) -> dict[str, Any]:
    """The Vertex AI StudySpec of a TuningSpec.

    Raises:
        UsageError: a resume-only legacy spec (Vertex AI cannot continue a legacy study, and a study needs its
            parameters and goal).
    """
    if tuning.resume_only:
        raise UsageError(f"invalid {tuning.where}: resumePreviousJobId {tuning.resume_previous_job_id} with no params "
                         "has no Vertex AI equivalent: Vertex AI cannot continue a legacy study, and a studySpec needs "
                         "its parameters and goal", hint=f"copy goal and params from job {tuning.resume_previous_job_id}"
                         "'s trainingInput.hyperparameters into the spec, or write it with --format legacy")
    parameters = []
    for param in tuning.params:
        entry: dict[str, Any] = {"parameterId": param.name}
        if param.type == "DOUBLE":
            entry["doubleValueSpec"] = {"minValue": float(param.min_value), "maxValue": float(param.max_value)}
        elif param.type == "INTEGER":  # int64 bounds travel as decimal strings
            entry["integerValueSpec"] = {"minValue": str(param.min_value), "maxValue": str(param.max_value)}
        elif param.type == "CATEGORICAL":
            entry["categoricalValueSpec"] = {"values": list(param.values)}
        else:
            entry["discreteValueSpec"] = {"values": [float(v) for v in param.values]}
        if param.scale:
            entry["scaleType"] = param.scale
        parameters.append(entry)
    study: dict[str, Any] = {"metrics": [{"metricId": tuning.metric, "goal": tuning.goal}], "parameters": parameters}
    if tuning.algorithm != "ALGORITHM_UNSPECIFIED":
        study["algorithm"] = tuning.algorithm
    if tuning.early_stopping:
        study["decayCurveStoppingSpec"] = {"useElapsedDuration": False}
    return study


def vertex_tuning_job(tuning: TuningSpec, spec: JobSpec) -> dict[str, Any]:
    """The HyperparameterTuningJob document: studySpec, trial counts and the trials' CustomJobSpec."""
    document: dict[str, Any] = {"studySpec": study_spec(tuning), "maxTrialCount": tuning.max_trials,
                                "parallelTrialCount": tuning.parallel_trials}
    if tuning.max_failed_trials is not None:
        document["maxFailedTrialCount"] = tuning.max_failed_trials
    document["trialJobSpec"] = requests.vertex_job_spec(spec)
    return document


def legacy_hyperparameters(tuning: TuningSpec) -> dict[str, Any]:
    """The legacy trainingInput.hyperparameters (ml.v1 GoogleCloudMlV1__HyperparameterSpec)."""
    params = []
    for param in tuning.params:
        entry: dict[str, Any] = {"parameterName": param.name, "type": param.type}
        if param.type in ("DOUBLE", "INTEGER"):
            entry.update(minValue=param.min_value, maxValue=param.max_value)
        elif param.type == "CATEGORICAL":
            entry["categoricalValues"] = list(param.values)
        else:
            entry["discreteValues"] = list(param.values)
        if param.scale:
            entry["scaleType"] = param.scale
        params.append(entry)
    # a resume-only spec keeps to what it said: the previous job's study supplies the rest
    document: dict[str, Any] = {"goal": tuning.goal, "hyperparameterMetricTag": tuning.metric, "params": params}
    document = {key: value for key, value in document.items() if not tuning.resume_only or value not in (
        None, [], DEFAULT_METRIC)}
    document.update(maxTrials=tuning.max_trials, maxParallelTrials=tuning.parallel_trials)
    if tuning.max_failed_trials is not None:
        document["maxFailedTrials"] = tuning.max_failed_trials
    if tuning.algorithm != "ALGORITHM_UNSPECIFIED":
        document["algorithm"] = tuning.algorithm
    if tuning.early_stopping:
        document["enableTrialEarlyStopping"] = True
    if tuning.resume_previous_job_id:
        document["resumePreviousJobId"] = tuning.resume_previous_job_id
    return document


def config_document(tuning: TuningSpec, spec: JobSpec, fmt: str) -> tuple[dict[str, Any], list[str]]:
    """The `--config` document of a tuning job for `fmt` ("vertex" or "legacy") and the notes to show."""
    if fmt == "legacy":
        document = requests.legacy_config(spec)
        document["trainingInput"]["hyperparameters"] = legacy_hyperparameters(tuning)
        return document, []
    job_document, notes = requests.config_document(spec, fmt)
    notes = [n for n in notes if not n.startswith("a CustomJobSpec has no display name")]
    if tuning.resume_previous_job_id:
        notes.append(f"hyperparameters.resumePreviousJobId {tuning.resume_previous_job_id}: Vertex AI cannot "
                     "continue a legacy study; the trials start afresh")
    notes.append(_METRIC_SOURCE.format(metric=tuning.metric))
    return {**vertex_tuning_job(tuning, spec), "trialJobSpec": job_document}, notes


def command_comment(spec: JobSpec, fmt: str) -> str:
    """The gcloud command line (a YAML comment) that carries what the file has no field for."""
    if fmt == "legacy":
        return requests.legacy_command_comment(spec)
    return requests.vertex_command_comment(spec, HP_COMMAND)


# -- files -----------------------------------------------------------------------------------------------------
def read_file(path: str | Path, *, only_tuning: bool) -> tuple[TuningSpec | None, list[str]]:
    """The tuning spec of a YAML file: `trainingInput.hyperparameters`, a bare `hyperparameters:`, or a Vertex
    HyperparameterTuningJob (`studySpec:`). None when the file has none.

    Args:
        only_tuning: `--hptune-config`: settings other than the tuning spec are named in the notes (the job comes
            from --config and the flags).
    """
    from mlsubmit.jobspec.safe_yaml import load_file

    field = "--hptune-config" if only_tuning else "--config"
    document = load_file(path, field)  # bounded as --config is
    document = normalize(document) if isinstance(document, dict) else document
    if not isinstance(document, dict):
        raise invalid_value(f"{field} {path}", type(document).__name__, "a YAML mapping (trainingInput: "
                            "hyperparameters: or studySpec:)")
    if "studySpec" in document:
        _validate(path, "GoogleCloudAiplatformV1HyperparameterTuningJob", "aiplatform.v1", document)
        tuning, notes = from_vertex(document)
        extra = set(document) - {"studySpec", *VERTEX_KEYS} - (set() if only_tuning else {"trialJobSpec",
                                                                                             "displayName", "labels"})
        return tuning, notes + _outside(extra, "", only_tuning)
    training = document.get("trainingInput") if "trainingInput" in document else None
    if training is None and "hyperparameters" in document:
        training, document = document, {"trainingInput": document}
    if not isinstance(training, dict) or training.get("hyperparameters") is None:
        if only_tuning:
            raise invalid_value("--hptune-config", str(path), "a file with trainingInput.hyperparameters, "
                                "hyperparameters: or studySpec:")
        return None, []
    _validate(path, "GoogleCloudMlV1__Job", "ml.v1", document)
    tuning, notes = from_legacy(training["hyperparameters"])
    extra = set(training) - {"hyperparameters"} if only_tuning else set()
    return tuning, notes + _outside(extra, "trainingInput.", only_tuning)


def trial_job_draft(document: dict[str, Any]) -> tuple[Any, list[str]]:
    """The SpecDraft of a HyperparameterTuningJob's trials (its trialJobSpec, display name and labels)."""
    if not document.get("trialJobSpec"):
        raise invalid_value("trialJobSpec", None, "the trials' CustomJobSpec (workerPoolSpecs …) in a "
                            "HyperparameterTuningJob --config", hint="or pass the study alone with --hptune-config")
    job = {key: document[key] for key in ("displayName", "labels") if document.get(key)}
    draft, notes = drafts.draft_from_vertex({**job, "jobSpec": document["trialJobSpec"]})
    known = {"studySpec", "trialJobSpec", "displayName", "labels", *VERTEX_KEYS}
    return draft, [f"{key}: has no place in a tuning job config; not mapped" for key, value in document.items()
                   if key not in known and value not in (None, {}, [], "")] + notes


def normalize(document: dict[str, Any]) -> dict[str, Any]:
    """YAML booleans among discrete values are the numbers 0 and 1, as gcloud reads them (`[False, True]`)."""
    def fix(values: Any) -> Any:
        return [int(v) if isinstance(v, bool) else v for v in values] if isinstance(values, list) else values

    training = document.get("trainingInput")
    for container in (training if isinstance(training, dict) else {}, document):
        hyper = container.get("hyperparameters")
        for param in (hyper.get("params") or []) if isinstance(hyper, dict) else []:
            if isinstance(param, dict) and "discreteValues" in param:
                param["discreteValues"] = fix(param["discreteValues"])
    study = document.get("studySpec")
    for param in (study.get("parameters") or []) if isinstance(study, dict) else []:
        spec = param.get("discreteValueSpec") if isinstance(param, dict) else None
        if isinstance(spec, dict) and "values" in spec:
            spec["values"] = fix(spec["values"])
    return document


def _validate(path: str | Path, schema: str, api: str, document: dict[str, Any]) -> None:
    from mlsubmit.jobspec import discovery

    violations = discovery.validate(api, schema, document, lenient_numbers=True)
    if violations:
        more = f" (and {len(violations) - 1} more)" if len(violations) > 1 else ""
        raise UsageError(f"invalid tuning spec in {path}: {violations[0].field}: {violations[0].description}{more}")


def _outside(keys: set[str], prefix: str, only_tuning: bool) -> list[str]:
    if not only_tuning:
        return []
    return [f"{prefix}{key}: --hptune-config takes only the tuning spec (the job comes from --config and the "
            f"flags); not mapped" for key in sorted(keys)]


def _unmapped(document: dict[str, Any], prefix: str, mapped: set[str]) -> list[str]:
    return [f"{prefix}{key}: has no place in a TuningSpec; not mapped"
            for key, value in document.items() if key not in mapped and value not in (None, {}, [], "")]
