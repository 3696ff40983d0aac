"""A local emulator of the training service: Vertex AI custom jobs, legacy AI Platform jobs and their Cloud
Logging entries, over the real REST paths and JSON, running every accepted job for real.

    from mlsubmit.emulator.app import Emulator

Modules, one concept each: `server` (HTTP on 127.0.0.1, decoding, routing), `errors` (Google's error shape),
`validation` (request bodies against the discovery documents), `plan` (a job body → replicas and their
service environment), `vertex`, `legacy`, `logging_api` (the three APIs), `jobs_api` (what the job APIs
share), `filters` and `paging` (list filters and page tokens), `store` (jobs and logs, persisted), `executor`
(the job lifecycle and queue), `prepare` (packages → isolated venv), `launch` (the runner and its outcome),
`reaper` (pids), `faults` (fault injection), `times` (RFC 3339), `app` (it all put together).
Importing this package is light: nothing here imports a Google client or TensorFlow at module level.
"""
