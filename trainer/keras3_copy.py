"""The cluster route's trained tf_keras model, copied into the same architecture built with Keras 3.

Cluster jobs train on tf_keras, but `mlsubmit predict` and users load the artifacts with Keras 3. A `.keras` file
saved by tf_keras 2.21 loads in Keras 3.15 and then fails to predict (TypeError in the input layer), so the chief
does not save the tf_keras model: it builds the same architecture from the same model code (trainer.models) with
Keras 3, sets the trained weights, checks both predict the same, and saves that — the artifacts are then exactly
those of a one-machine job. The optimizer in the saved file is compiled fresh (its tf_keras state does not carry
over); the weights are the trained ones.
"""

from __future__ import annotations

import numpy as np

from trainer.errors import TrainerError


def keras3_template(trained, config, arrays, atol: float = 1e-5):
    """A compiled Keras 3 model with `trained`'s architecture and weights. Raises TrainerError if they disagree."""
    import keras

    from trainer.models import build_model
    from trainer.multi_gpu import build_template
    from trainer.train import compile_model

    template = build_template(build_model, keras, config.model, arrays.input_shape, arrays.num_classes)
    template.set_weights(trained.get_weights())
    compile_model(keras, template, config)
    sample = arrays.x_test[:32]
    # Calling the model (not `predict`) reads the strategy's variables on this process alone: under
    # MultiWorkerMirroredStrategy `predict` would be a collective step the other workers no longer take.
    difference = float(np.max(np.abs(np.asarray(trained(sample, training=False)) - template.predict(sample, verbose=0))))
    if difference > atol:
        raise TrainerError(f"the Keras 3 copy of the trained model predicts differently (max difference "
                           f"{difference:.3g} > {atol}); the artifacts would not be trustworthy")
    return template
