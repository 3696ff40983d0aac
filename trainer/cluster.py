"""The cluster this process belongs to, from TF_CONFIG or Vertex AI's CLUSTER_SPEC (pure functions).

TF_CONFIG: {"cluster": {"chief"|"master": [...], "worker": [...], "ps": [...]}, "task": {"type", "index"}}.
Legacy AI Platform said `master`; TensorFlow 2 only accepts `chief`, so `master` is rewritten to `chief`.
`evaluator` is a task type but never a cluster key. CLUSTER_SPEC (Vertex AI) names worker pools
workerpool0 (chief), workerpool1 (workers), workerpool2 (ps), workerpool3 (evaluators). The chief learns how
many evaluators run beside the cluster (so it writes the checkpoints they evaluate) from CLUSTER_SPEC or TF_CONFIG.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from trainer.errors import TrainerError

_POOL_ROLES = {"workerpool0": "chief", "workerpool1": "worker", "workerpool2": "ps", "workerpool3": "evaluator"}


@dataclass(frozen=True)
class Cluster:
    """The job's shape and this process's role in it. `spec` is TensorFlow's cluster dict (with `chief`)."""

    spec: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    task_type: str = "chief"
    task_index: int = 0
    evaluators: int = 0  # evaluator tasks beside the cluster (never part of TensorFlow's cluster spec)

    @property
    def is_distributed(self) -> bool:
        return sum(len(v) for v in self.spec.values()) > 1

    @property
    def is_chief(self) -> bool:
        return self.task_type == "chief" or (self.task_type == "worker" and "chief" not in self.spec
                                              and self.task_index == 0)

    def count(self, role: str) -> int:
        return len(self.spec.get(role, ()))

    def shape(self) -> dict[str, int]:
        shape = {role: len(addresses) for role, addresses in self.spec.items()}
        if self.evaluators or self.task_type == "evaluator":
            shape["evaluator"] = max(self.evaluators, 1)
        return shape or {"chief": 1}

    def tf_config(self) -> dict:
        """The TF_CONFIG TensorFlow 2 accepts (master rewritten to chief)."""
        return {"cluster": {k: list(v) for k, v in self.spec.items()},
                "task": {"type": self.task_type, "index": self.task_index}}


def _normalise(cluster: Mapping[str, list], task_type: str, index: int) -> Cluster:
    spec = {("chief" if k == "master" else k): tuple(v) for k, v in cluster.items() if v and k != "evaluator"}
    task_type = "chief" if task_type == "master" else task_type
    allowed = {"chief", "worker", "ps", "evaluator"}
    if task_type not in allowed:
        raise TrainerError(f"invalid TF_CONFIG: task type {task_type!r}; expected one of {', '.join(sorted(allowed))}")
    if len(spec.get("chief", ())) > 1:
        raise TrainerError(f"invalid TF_CONFIG: {len(spec['chief'])} chiefs; a cluster has at most one chief")
    if task_type != "evaluator" and index >= len(spec.get(task_type, ())) and spec:
        raise TrainerError(f"invalid TF_CONFIG: task {task_type}:{index} is not in the cluster {dict(spec)}")
    return Cluster(spec, task_type, index)


def _evaluator_count(env: Mapping[str, str]) -> int:
    """Evaluators beside the cluster: CLUSTER_SPEC's workerpool3 (Vertex AI), TF_CONFIG's `job.evaluator_count`
    (legacy AI Platform puts the job's trainingInput there) or an `evaluator` key in TF_CONFIG's cluster."""
    counts = [0]
    for key, read in (("CLUSTER_SPEC", lambda c: len((c.get("cluster") or {}).get("workerpool3") or ())),
                      ("TF_CONFIG", lambda c: len((c.get("cluster") or {}).get("evaluator") or ())),
                      ("TF_CONFIG", lambda c: int((c.get("job") or {}).get("evaluator_count") or 0))):
        try:
            counts.append(read(json.loads(env.get(key) or "{}")))
        except (ValueError, AttributeError, TypeError):
            pass  # a malformed value is reported by _from_environment
    return max(counts)


def from_environment(env: Mapping[str, str]) -> Cluster:
    """Read TF_CONFIG (preferred) or CLUSTER_SPEC; no cluster means a one-machine job (the chief)."""
    cluster = _from_environment(env)
    evaluators = _evaluator_count(env)
    return replace(cluster, evaluators=evaluators) if evaluators else cluster


def _from_environment(env: Mapping[str, str]) -> Cluster:
    raw = env.get("TF_CONFIG", "").strip()
    if raw:
        try:
            config = json.loads(raw)
            cluster, task = config.get("cluster") or {}, config.get("task") or {}
            return _normalise(cluster, str(task.get("type", "chief")), int(task.get("index", 0)))
        except (ValueError, AttributeError, TypeError) as exc:
            raise TrainerError(f"invalid TF_CONFIG: {exc}; expected JSON like "
                               '{"cluster": {"chief": ["host:port"]}, "task": {"type": "chief", "index": 0}}') from None
    raw = env.get("CLUSTER_SPEC", "").strip()
    if raw:
        try:
            config = json.loads(raw)
            pools = config.get("cluster") or {}
            task = config.get("task") or {}
            cluster = {_POOL_ROLES[p]: list(a) for p, a in pools.items() if p in _POOL_ROLES}
            role = _POOL_ROLES.get(str(task.get("type", "workerpool0")), "chief")
            return _normalise(cluster, role, int(task.get("index", 0)))
        except (ValueError, AttributeError, TypeError, KeyError) as exc:
            raise TrainerError(f"invalid CLUSTER_SPEC: {exc}") from None
    return Cluster()
