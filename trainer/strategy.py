"""Which tf.distribute strategy runs the job: one pure function of the cluster and the devices found.

- one machine, ≥ 2 devices → MirroredStrategy (what keras.utils.multi_gpu_model did, done by TensorFlow)
- one machine, 1 device → the default strategy on that device
- chief + workers → MultiWorkerMirroredStrategy (synchronous, all their devices)
- parameter servers present → ParameterServerStrategy (asynchronous, the original recipe's scheme)
- evaluator → no training strategy: it evaluates the chief's checkpoints as they appear
"""

from __future__ import annotations

from dataclasses import dataclass

from trainer.cluster import Cluster
from trainer.errors import TrainerError

DEFAULT, MIRRORED, MULTI_WORKER, PARAMETER_SERVER, EVALUATOR = (
    "default", "mirrored", "multi_worker_mirrored", "parameter_server", "evaluator")


@dataclass(frozen=True)
class StrategyChoice:
    name: str
    reason: str

    @property
    def needs_legacy_keras(self) -> bool:
        """Cluster strategies run on tf_keras (Keras 3 fit cannot; see README)."""
        return self.name in (MULTI_WORKER, PARAMETER_SERVER)


def uses_cluster_route(cluster: Cluster) -> bool:
    """Whether this process runs the cluster route (trainer.cluster_train, on tf_keras): a distributed cluster, or
    evaluators beside the chief (they read the checkpoints the cluster route writes)."""
    return cluster.is_distributed or cluster.evaluators > 0 or cluster.task_type == "evaluator"


def choose(cluster: Cluster, device_count: int) -> StrategyChoice:
    """Pick the strategy for this process. Raises TrainerError for shapes no strategy can serve."""
    workers, ps = cluster.count("worker"), cluster.count("ps")
    if ps and not workers:
        raise TrainerError(f"invalid cluster: {ps} parameter server(s) but no workers; parameter-server training "
                           "needs at least one worker (add --workers N)")
    if ps and not cluster.count("chief"):
        raise TrainerError(f"invalid cluster: {ps} parameter server(s) but no chief; parameter-server training needs "
                           "a chief (in TF_CONFIG `chief` or `master`) to coordinate the workers")
    if cluster.task_type == "evaluator":
        return StrategyChoice(EVALUATOR, "evaluator task: evaluates the chief's checkpoints as they appear")
    if ps:
        return StrategyChoice(PARAMETER_SERVER, f"{ps} parameter server(s) and {workers} worker(s): asynchronous "
                              "parameter-server training")
    if cluster.is_distributed:
        return StrategyChoice(MULTI_WORKER, f"{cluster.count('chief') + workers} machines: synchronous multi-worker "
                              f"data parallel over {device_count} device(s) each")
    if device_count >= 2:
        return StrategyChoice(MIRRORED, f"{device_count} devices on one machine: synchronous data parallel "
                              "(MirroredStrategy)")
    return StrategyChoice(DEFAULT, "one device: the default strategy")


def build(choice: StrategyChoice, device_names: tuple[str, ...]):
    """Construct the tf.distribute strategy for a one-machine choice (cluster strategies: trainer.cluster_train)."""
    import tensorflow as tf

    if choice.name == MIRRORED:
        return tf.distribute.MirroredStrategy(devices=list(device_names))
    if choice.name == DEFAULT:
        return tf.distribute.OneDeviceStrategy(device_names[0]) if device_names[0].startswith("/gpu") \
            else tf.distribute.get_strategy()
    raise TrainerError(f"strategy {choice.name} is built by the cluster route, not here")
