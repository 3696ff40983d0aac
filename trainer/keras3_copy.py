"""The cluster route's trained tf_keras model, copied into the same architecture built with Keras 3.

Cluster jobs train on tf_keras, but `mlsubmit predict` and users load the artifacts with Keras 3. A `.keras` file
saved by tf_keras 2.21 loads in Keras 3.15 and then fails to predict (TypeError in the input layer), so the chief
does not save the tf_keras model: it builds the same architecture from the same model code (trainer.models) with
Keras 3, sets the trained weights, checks both predict the same, and saves that — the artifacts are then exactly
those of a one-machine job. The optimizer's state (step count, learning rate, slots such as Adam's moments) is
carried over too, so the saved model resumes training where the cluster stopped, as a one-machine model does.
"""

from __future__ import annotations

import numpy as np

from trainer.errors import TrainerError


def keras3_template(trained, config, arrays, atol: float = 1e-5):
    """A compiled Keras 3 model with `trained`'s architecture and weights. Raises TrainerError if they disagree."""
    import keras

    from trainer.models import build_model
    from mlsubmit_runtime.multi_gpu import build_template
    from trainer.train import compile_model

    template = build_template(build_model, keras, config.model, arrays.input_shape, arrays.num_classes)
    template.set_weights(trained.get_weights())
    compile_model(keras, template, config)
    copy_optimizer_state(trained.optimizer, template)
    sample = arrays.x_test[:32]
    # Calling the model (not `predict`) reads the strategy's variables on this process alone: under
    # MultiWorkerMirroredStrategy `predict` would be a collective step the other workers no longer take.
    difference = float(np.max(np.abs(np.asarray(trained(sample, training=False)) - template.predict(sample, verbose=0))))
    if difference > atol:
        raise TrainerError(f"the Keras 3 copy of the trained model predicts differently (max difference "
                           f"{difference:.3g} > {atol}); the artifacts would not be trustworthy")
    return template


def copy_optimizer_state(source, template) -> None:
    """tf_keras optimizer variables are [iteration, *slots]; Keras 3's are [iteration, learning_rate, *slots], with
    the slots in the same order (per trainable variable). Slots are copied only when every shape matches."""
    template.optimizer.build(template.trainable_variables)
    theirs = [np.asarray(v.numpy()) for v in source.variables]
    mine = list(template.optimizer.variables)
    mine[0].assign(theirs[0])
    mine[1].assign(np.asarray(source.learning_rate.numpy(), dtype="float32"))
    if len(mine) - 2 == len(theirs) - 1 and all(tuple(a.shape) == b.shape for a, b in zip(mine[2:], theirs[1:])):
        for variable, value in zip(mine[2:], theirs[1:]):
            variable.assign(value)
