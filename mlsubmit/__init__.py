"""mlsubmit: from one validated job spec to a trained Keras model, locally or on Google Cloud."""

__version__ = "0.1.0"
