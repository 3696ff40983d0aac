"""mlsubmit's runtime: what a trainer package may import on the training machine, locally and in the cloud.

A small pure-Python distribution (`mlsubmit-runtime`) with no import of TensorFlow at module level. mlsubmit
ships it inside its own wheel and, when a trainer package lists `mlsubmit-runtime` in its requirements (or
imports `mlsubmit_runtime`), builds the runtime's own sdist and stages it beside the trainer in the job's
package URIs, so the cloud job has exactly the code the local run had. A user's package named `trainer`
imports it without clashing with anything mlsubmit installs:

    from mlsubmit_runtime.multi_gpu import multi_gpu_model     # keras.utils.multi_gpu_model on tf.distribute
    from mlsubmit_runtime.artifacts import publish_dir         # files to a local dir or gs://, MANIFEST.json last
    from mlsubmit_runtime.devices import emulated_devices      # `train --local --gpus N` without N GPUs
    from mlsubmit_runtime.hypertune import report_metric       # a tuning metric, as cloudml-hypertune writes it

Modules: `errors` (InputError), `kerasmod` (Keras 3 or tf_keras), `features` (the .npz feature/label
preprocessing that mlsubmit predict shares), `storage` (local dirs and gs:// prefixes), `artifacts`
(MANIFEST.json), `multi_gpu`, `devices`, `hypertune`, `heap` (frameworks imported with the garbage collector paused,
then frozen).
"""

__version__ = "0.1.0"
DISTRIBUTION = "mlsubmit-runtime"
EMULATE_DEVICES_VARIABLE = "MLSUBMIT_EMULATE_DEVICES"  # set by `mlsubmit train --local` for GPUs it lacks
