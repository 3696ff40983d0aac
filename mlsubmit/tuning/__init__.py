"""Hyperparameter tuning: the frozen TuningSpec, its legacy <-> Vertex AI documents, and the suggestions (grid, random, Optuna) that trials run with."""
