"""Google Cloud access: project/region settings, the one API client factory, Cloud Storage, and submitting a job once."""
