"""Run the emulator in the foreground, with a Cloud Storage emulator of its own when none is given.

Bad input (a port that cannot be bound, a data dir that is a file or not writable) is a UsageError before
anything is served. Ctrl-C or SIGTERM stops the server, every job's replicas (running jobs end FAILED, saying
the emulator stopped) and the Cloud Storage emulator it started.
"""

from __future__ import annotations

import errno
import logging
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mlsubmit.errors import UsageError, invalid_value


def _check_data_dir(data_dir: str | None) -> None:
    if data_dir is None:
        return
    path = Path(data_dir)
    if path.exists() and not path.is_dir():
        raise invalid_value("--data-dir", data_dir, "a directory", hint="it is a file; pick another path")
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / ".write-check"
        probe.write_text("")
        probe.unlink()
    except OSError as err:
        raise invalid_value("--data-dir", data_dir, "a directory mlsubmit can write",
                            hint=err.strerror or str(err)) from None


def serve(*, port: int, gcs_endpoint: str | None, gcs_port: int, data_dir: str | None, max_running: int,
          ready: Callable[..., None], buckets: tuple[str, ...] = (), log_requests: bool = True,
          preempt_spot: tuple[float | None, int] = (None, 2), capacity: Any = None) -> None:
    """Serve until KeyboardInterrupt or SIGTERM; `ready(endpoint, gcs, started_gcs, data_dir, max_running, buckets)`
    once listening, after `buckets` were created in the Cloud Storage emulator. Requests are logged on stderr
    (method, path, status; never headers or query strings)."""
    _check_data_dir(data_dir)
    gcs = None
    if gcs_endpoint is None:
        from mlsubmit.emulator.gcs_emulator import GcsEmulator

        try:
            gcs = GcsEmulator(port=gcs_port).start()
        except RuntimeError as err:
            raise UsageError(f"the Cloud Storage emulator did not start: {err}",
                             hint="pick another --gcs-port, or pass --gcs-endpoint URL") from None
        gcs_endpoint = gcs.endpoint
    try:
        _create_buckets(gcs_endpoint, buckets)
        from mlsubmit.emulator.app import Emulator

        try:
            emulator = Emulator(port=port, data_dir=data_dir, gcs_endpoint=gcs_endpoint, max_running=max_running,
                                preempt_spot_after=preempt_spot[0], preempt_spot_times=preempt_spot[1],
                                capacity=capacity)
        except OSError as err:
            if err.errno in (errno.EADDRINUSE, errno.EACCES):
                raise invalid_value("--port", port, "a free port of 127.0.0.1",
                                    hint=f"{err.strerror}; pick another --port, or --port 0 for any free one") \
                    from None
            raise
        for damaged in emulator.store.damaged:
            print(f"warning: skipped a damaged file in --data-dir: {damaged}", file=sys.stderr, flush=True)
        os.environ["STORAGE_EMULATOR_HOST"] = gcs_endpoint  # package look-ups and downloads go there
        os.environ.setdefault("GOOGLE_CLOUD_PROJECT", "local-project")
        _serve(emulator, ready=lambda: ready(emulator.endpoint, gcs_endpoint, gcs is not None, data_dir, max_running,
                                             buckets), log_requests=log_requests)
    finally:
        if gcs is not None:
            gcs.stop()


def _create_buckets(gcs_endpoint: str, buckets: tuple[str, ...]) -> None:
    import urllib.error

    from mlsubmit.emulator.gcs_emulator import create_bucket

    for name in buckets:
        try:
            create_bucket(gcs_endpoint, name)
        except (urllib.error.URLError, OSError) as err:
            raise invalid_value("--bucket", name, "a bucket the Cloud Storage emulator can create",
                                hint=f"{gcs_endpoint} answered: {getattr(err, 'reason', err)}") from None


def _serve(emulator, *, ready: Callable[[], None], log_requests: bool) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    logger = logging.getLogger("mlsubmit.emulator")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO if log_requests else logging.WARNING)
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        ready()
        emulator.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        emulator.stop()
        signal.signal(signal.SIGTERM, previous)
        logger.removeHandler(handler)


def _interrupt(signum, frame):
    raise KeyboardInterrupt()
