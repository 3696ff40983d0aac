"""The Kubernetes objects of a job spec (pure builders) and their validation against Kubernetes 1.31-1.35 and the
JobSet models, and `mlsubmit config --format kubernetes`."""

import json
import subprocess
import sys

import pytest
import yaml

from mlsubmit.errors import UsageError
from mlsubmit.jobspec.spec import JobSpec, Pool
from mlsubmit.kube import manifests as m
from mlsubmit.kube import validate as v


def _spec(**changes):
    fields = dict(tier="CUSTOM", chief=Pool("chief", "n1-standard-8", 1, "NVIDIA_TESLA_T4", 1),
                  worker=Pool("worker", "n1-standard-4", 2), ps=Pool("ps", "n1-highmem-2", 1),
                  job_name="my-job", args=("--steps", "5"), max_runtime_seconds=600)
    return JobSpec(**{**fields, **changes})


def _job(spec, api="job", **kw):
    return m.KubeJob(m.kube_name(spec.job_name), "r1", packages=("gs://bucket/t.tar.gz",), api=api, **kw)


def test_indexed_jobs_and_headless_service():
    spec = _spec()
    objects = m.manifests(spec, _job(spec))
    assert [(o["kind"], o["metadata"]["name"]) for o in objects] == [
        ("ConfigMap", "my-job-launcher"), ("Service", "my-job"), ("Job", "my-job-chief"), ("Job", "my-job-worker"),
        ("Job", "my-job-ps")]
    service, worker = objects[1], objects[3]
    assert service["spec"]["clusterIP"] == "None" and service["spec"]["selector"] == {m.JOB_LABEL: "my-job"}
    body = worker["spec"]
    assert (body["completionMode"], body["completions"], body["parallelism"]) == ("Indexed", 2, 2)
    assert body["activeDeadlineSeconds"] == 600
    pod = body["template"]["spec"]
    assert pod["subdomain"] == "my-job" and pod["restartPolicy"] == "Never"
    assert body["template"]["metadata"]["labels"] == {m.JOB_LABEL: "my-job", m.REQUEST_LABEL: "r1",
                                                      m.ROLE_LABEL: "worker"}
    container = pod["containers"][0]
    assert container["command"] == ["python3", "/mlsubmit/replica.py", "/mlsubmit/worker.json"]
    assert container["resources"]["requests"] == {"cpu": "3600m", "memory": "13824Mi"}
    assert "nodeSelector" not in pod and "limits" not in container["resources"]
    launcher = yaml.safe_load(objects[0]["data"]["worker.json"])
    assert launcher["role"] == "worker" and "index" not in launcher  # $JOB_COMPLETION_INDEX gives it
    assert launcher["address_pattern"] == "{job}-{role}-{index}.my-job:2222"
    assert launcher["roles"] == [["chief", 1], ["worker", 2], ["ps", 1]] and launcher["args"] == ["--steps", "5"]
    assert launcher["packages"] == ["gs://bucket/t.tar.gz"]
    assert objects[0]["data"]["replica.py"].startswith('"""One replica of a training job')


def test_gpu_and_spot_placement():
    spec = _spec()
    chief = m.manifests(spec, _job(spec, spot=True))[2]["spec"]["template"]["spec"]
    assert chief["nodeSelector"] == {m.GKE_ACCELERATOR: "nvidia-tesla-t4", m.GKE_SPOT: "true"}
    assert chief["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in chief["tolerations"]
    assert chief["containers"][0]["image"] == "tensorflow/tensorflow:2.21.0-gpu"  # the default GPU image


@pytest.mark.parametrize("gpu,label", [("NVIDIA_L4", "nvidia-l4"), ("NVIDIA_TESLA_A100", "nvidia-tesla-a100"),
                                       ("NVIDIA_H100_80GB", "nvidia-h100-80gb"), ("NVIDIA_TESLA_V100",
                                                                                  "nvidia-tesla-v100")])
def test_gke_gpu_labels(gpu, label):
    assert m.gke_gpu_label(gpu) == label


def test_k80_and_tpu_refused():
    with pytest.raises(UsageError, match="GKE has a node label"):
        m.check_spec(_spec(chief=Pool("chief", "n1-standard-8", 1, "NVIDIA_TESLA_K80", 1)))


def test_jobset_one_replicated_job_per_role():
    spec = _spec()
    config_map, jobset = m.manifests(spec, _job(spec, api="jobset", max_restarts=2))
    body = jobset["spec"]
    assert [r["name"] for r in body["replicatedJobs"]] == ["chief", "worker", "ps"]
    assert body["successPolicy"] == {"operator": "All", "targetReplicatedJobs": ["chief"]}
    assert body["failurePolicy"] == {"maxRestarts": 2} and body["network"]["subdomain"] == "my-job"
    assert yaml.safe_load(config_map["data"]["ps.json"])["address_pattern"] == "{job}-{role}-0-{index}.my-job:2222"


@pytest.mark.parametrize("version", v.SUPPORTED)
def test_manifests_validate_strictly(version):
    spec = _spec()
    v.validate(m.manifests(spec, _job(spec)), version)
    v.validate(m.manifests(spec, _job(spec, api="jobset")), version)
    v.validate(m.manifests(spec, _job(spec, api="tfjob")), version)


def test_schema_refusals_name_the_field():
    spec = _spec()
    objects = m.manifests(spec, _job(spec))
    objects[2]["spec"]["template"]["spec"]["containers"][0]["imagePullPolicyy"] = "Always"
    with pytest.raises(UsageError, match="my-job-chief"):
        v.validate(objects)
    _, jobset = m.manifests(spec, _job(spec, api="jobset"))
    jobset["spec"]["successPolicy"]["operatorr"] = "All"
    with pytest.raises(UsageError, match="unknown field spec.successPolicy.operatorr"):
        v.validate([jobset])
    _, jobset = m.manifests(spec, _job(spec, api="jobset"))
    jobset["spec"]["replicatedJobs"][0]["replicas"] = "two"
    with pytest.raises(UsageError, match="JobSet schema refuses"):
        v.validate([jobset])


def _config(*args):
    return subprocess.run([sys.executable, "-m", "mlsubmit", "config", "--format", "kubernetes", *args],
                          capture_output=True, text=True, timeout=60)


def test_config_format_kubernetes_prints_apply_ready_yaml():
    done = _config("--tier", "CUSTOM", "--workers", "1", "--job-name", "cfg-job", "--package-uris",
                   "gs://bucket/a.tar.gz")
    assert done.returncode == 0, done.stderr
    kinds = [d["kind"] for d in yaml.safe_load_all(done.stdout) if d]
    assert kinds == ["ConfigMap", "Service", "Job", "Job"]
    tfjob = _config("--tier", "CUSTOM", "--workers", "1", "--job-name", "cfg-job", "--k8s-api", "tfjob")
    assert tfjob.returncode == 0 and "kubectl delete tfjobs,configmaps -l mlsubmit.dev/job=cfg-job" in tfjob.stdout
    assert [d["kind"] for d in yaml.safe_load_all(tfjob.stdout) if d] == ["ConfigMap", "TFJob"], tfjob.stderr
    bad = _config("--gpus", "1", "--gpu-type", "NVIDIA_TESLA_K80", "--job-name", "x")
    assert bad.returncode == 2 and bad.stdout == "" and len(bad.stderr.strip().splitlines()) == 1
    assert "NVIDIA_TESLA_K80" in bad.stderr


def test_tfjob_one_replica_spec_per_role_for_the_training_operator():
    spec = _spec(evaluator=Pool("evaluator", "n1-standard-4", 1))
    config_map, tfjob = m.manifests(spec, _job(spec, api="tfjob"))
    assert (tfjob["apiVersion"], tfjob["kind"]) == ("kubeflow.org/v1", "TFJob")
    body = tfjob["spec"]
    assert body["runPolicy"] == {"cleanPodPolicy": "Running", "backoffLimit": 0, "activeDeadlineSeconds": 600}
    replicas = body["tfReplicaSpecs"]
    assert {k: r["replicas"] for k, r in replicas.items()} == {"Chief": 1, "Worker": 2, "PS": 1, "Evaluator": 1}
    assert {r["restartPolicy"] for r in replicas.values()} == {"Never"}
    container = replicas["Worker"]["template"]["spec"]["containers"][0]
    # the operator finds the TensorFlow port by these names, and sets TF_CONFIG itself
    assert container["name"] == "tensorflow" and container["ports"] == [{"containerPort": 2222, "name": "tfjob-port"}]
    assert "subdomain" not in replicas["Worker"]["template"]["spec"]
    launcher = yaml.safe_load(config_map["data"]["worker.json"])
    assert launcher["tf_config"] == "env"
    tfjob["spec"]["runPolicy"]["cleanPodPolicyy"] = "All"
    with pytest.raises(UsageError, match="TFJob schema refuses 'my-job': unknown field spec.runPolicy.cleanPodPolicyy"):
        v.validate([tfjob])
    del tfjob["spec"]["runPolicy"]["cleanPodPolicyy"]
    replicas["PS"]["template"]["spec"]["containers"][0]["imagePullPolicyy"] = "Always"
    with pytest.raises(UsageError, match="imagePullPolicyy"):
        v.validate([tfjob])


def test_the_launcher_takes_the_training_operators_tf_config():
    from mlsubmit.launcher import replica

    spec = _spec()
    launcher = m.launcher_specs(spec, _job(spec, api="tfjob"))["worker"]
    operator = {"cluster": {"chief": ["my-job-chief-0.default.svc:2222"],
                            "worker": ["my-job-worker-0.default.svc:2222", "my-job-worker-1.default.svc:2222"],
                            "ps": ["my-job-ps-0.default.svc:2222"]},
                "task": {"type": "worker", "index": 1}, "environment": "cloud"}
    located = replica.operator_located(replica.check_spec(launcher), {"TF_CONFIG": json.dumps(operator)})
    assert replica.locate(located, {}) == ("worker", 1)
    env, args = replica.replica_env(located, "worker", 1, {"TF_CONFIG": "stale"})
    assert json.loads(env["TF_CONFIG"])["cluster"] == operator["cluster"]
    assert json.loads(env["CLUSTER_SPEC"])["cluster"]["workerpool2"] == ["my-job-ps-0.default.svc:2222"]
    assert env["RANK"] == "2" and args == ("--steps", "5")
    with pytest.raises(replica.SpecError, match="Training Operator"):
        replica.operator_located(launcher, {})


def test_pods_install_the_images_listed_packages_the_package_imports_before_it(tmp_path):
    """A trainer that imports `hypertune` in a module other than its entry point (the image it was written for
    carried cloudml-hypertune) gets it in its pods as in the Vertex AI container's command: read from the sdist the
    launcher spec carries, installed with what the image adds, before the package."""
    from support.tiny_package import make_project

    from mlsubmit.images.catalog import HYPERTUNE
    from mlsubmit.launcher import replica
    from mlsubmit.targets.cluster_run import build_packages

    package = make_project(tmp_path / "proj")
    (package / "sub" / "model.py").write_text("import hypertune\n\n\ndef report(value):\n"
                                             "    hypertune.HyperTune().report_hyperparameter_tuning_metric("
                                             "hyperparameter_metric_tag='loss', metric_value=value)\n")
    shipped, _ = build_packages(str(package), None, lambda text: None)
    spec = JobSpec(job_name="tuned", python_module="tinypkg.task")
    chief = m.launcher_specs(spec, m.KubeJob("tuned", "r1", packages=tuple(shipped)))["chief"]
    assert chief["requirements"] == ["tensorboard~=2.21.0", "==".join(HYPERTUNE)], chief.get("requirements")
    replica.check_spec(chief)  # the launcher takes it: the requirements go first in its pip install (installed_python)
    assert chief["packages"] == shipped
    # the ConfigMap the pods mount holds that spec; a package that imports none of them gets none
    held = json.loads(m.config_map(spec, m.KubeJob("tuned", "r1", packages=tuple(shipped)))["data"]["chief.json"])
    assert held["requirements"] == chief["requirements"]
    (package / "sub" / "model.py").unlink()
    plain, _ = build_packages(str(package), None, lambda text: None)
    assert m.launcher_specs(spec, m.KubeJob("tuned", "r1", packages=tuple(plain)))["chief"]["requirements"] == [
        "tensorboard~=2.21.0"]
    # a gs:// package is not fetched to be read: what the job spec says it imports counts (a submission sets it)
    by_uri = m.launcher_specs(spec.replace(package_imports=("pandas",)), _job(spec))["chief"]
    assert by_uri["requirements"] == ["tensorboard~=2.21.0", "pandas==2.2.3"]
