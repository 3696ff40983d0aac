"""Kubernetes: manifests built from a JobSpec (manifests), validated offline (validate)."""
