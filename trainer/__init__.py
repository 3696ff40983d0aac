"""mlsubmit's trainer: runs on the training machine as `python -m trainer.task --job-dir …`.

It builds a Keras model once as a CPU-resident template, trains it data-parallel on every GPU the machine has
(tf.distribute), takes its role from TF_CONFIG in a cluster, and saves the template, metrics and plots to the job
directory (local or gs://), with MANIFEST.json written last. With --backend jax (or KERAS_BACKEND=jax) the same
model and input pipeline train under keras.distribution.DataParallel; with torch, on one device
(trainer.backends, trainer.backend_train).
"""

__version__ = "0.1.0"
