"""A tf.keras-2 trainer (feature columns, DenseFeatures): runs on TensorFlow <= 2.15, or on 2.16+ with tf-keras
installed and TF_USE_LEGACY_KERAS=1."""

NAME = "kerastwo"
VERSION = "0.1.0"
REQUIRED_PACKAGES = []
