"""`mlsubmit emulator`: serve the training-service emulator on 127.0.0.1 until Ctrl-C (parse and render)."""

from __future__ import annotations

import functools
import re
import sys
import urllib.parse
from typing import Annotated, Any, List, Optional

import typer

from mlsubmit.errors import UsageError, invalid_value

DEFAULT_PORT = 8090
_APIS = "Vertex AI v1 customJobs, AI Platform v1 jobs, Cloud Logging v2 entries"
_BUCKET_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{1,61}[a-z0-9]$")  # Cloud Storage's bucket names (up to 63 characters)


def _port(value: int, flag: str) -> int:
    if not 0 <= value <= 65535:
        raise invalid_value(flag, value, "a TCP port from 1 to 65535 (0: any free port)")
    return value


def _check_gcs_endpoint(url: str) -> str:
    import urllib.error  # here, not at import: urllib.request costs ~30 ms of every command's start-up
    import urllib.request

    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise invalid_value("--gcs-endpoint", url, "http://HOST:PORT of a Cloud Storage emulator",
                            hint="for example --gcs-endpoint http://127.0.0.1:4443")
    url = url.rstrip("/")
    try:
        urllib.request.urlopen(f"{url}/storage/v1/b?project=emulator-check", timeout=5).close()
    except urllib.error.HTTPError:
        pass  # it answered
    except (urllib.error.URLError, OSError) as err:
        raise UsageError(f"invalid value for --gcs-endpoint: nothing answers at {url} ({getattr(err, 'reason', err)})",
                         hint="start the Cloud Storage emulator first, or leave --gcs-endpoint out to have one "
                              "started") from None
    return url


def _bucket(value: str) -> str:
    name = value.removeprefix("gs://").rstrip("/")
    if not _BUCKET_NAME.match(name):
        raise invalid_value("--bucket", value, "a bucket name: 3-63 lower-case letters, digits, '-', '_' or '.', "
                            "starting and ending with a letter or digit", hint="for example --bucket my-bucket")
    return name


def _say_ready(endpoint: str, gcs: str, started_gcs: bool, data_dir: Optional[str], max_running: int,
               buckets: tuple[str, ...] = (), capacity: Any = None) -> None:
    typer.echo(f"Training-service emulator on {endpoint} ({_APIS})")
    typer.echo(f"Cloud Storage: {gcs}" + (" (fake-gcs-server started by mlsubmit, in memory)" if started_gcs else "")
               + (f"; bucket(s) {', '.join(f'gs://{b}' for b in buckets)}" if buckets else ""))
    typer.echo(f"Jobs and logs: {'kept in ' + data_dir if data_dir else 'in memory (--data-dir DIR keeps them)'}; "
               f"at most {max_running} job(s) run at once, the rest queue")
    typer.echo("Use it from a shell:")
    for name, value in (("MLSUBMIT_API_ENDPOINT", endpoint), ("STORAGE_EMULATOR_HOST", gcs),
                        ("CLOUDSDK_API_ENDPOINT_OVERRIDES_AIPLATFORM", f"{endpoint}/"),
                        ("CLOUDSDK_API_ENDPOINT_OVERRIDES_ML", f"{endpoint}/"),
                        ("CLOUDSDK_API_ENDPOINT_OVERRIDES_LOGGING", f"{endpoint}/")):
        typer.echo(f"  export {name}={value}")
    typer.echo(f'or from Python: googleapiclient.discovery.build("aiplatform", "v1", static_discovery=True, '
               f'credentials=AnonymousCredentials(), client_options={{"api_endpoint": "{endpoint}"}})')
    rules = capacity.describe() if capacity is not None else {}
    if any(rules.values()):
        said = [f"no quota in {', '.join(rules['quota'])}" if rules["quota"] else "",
                f"no machines in {', '.join(rules['stockout'])}" if rules["stockout"] else ""]
        typer.echo(f"Capacity: {'; '.join(s for s in said if s)} (GET|POST|DELETE {endpoint}/emulator/v1/capacity)")
    typer.echo("Any bearer token is accepted. Ctrl-C stops the emulator and every job it runs.", nl=True)
    sys.stdout.flush()


def emulator_command(
    port: Annotated[int, typer.Option("--port", metavar="P", help="Port on 127.0.0.1 (0: any free port).")
                    ] = DEFAULT_PORT,
    gcs_port: Annotated[Optional[int], typer.Option(
        "--gcs-port", metavar="Q", show_default=False,
        help="Start the bundled Cloud Storage emulator on this port of 127.0.0.1. Default: a free port.")] = None,
    gcs_endpoint: Annotated[Optional[str], typer.Option(
        "--gcs-endpoint", metavar="URL", show_default=False,
        help="Use this running Cloud Storage emulator (http://HOST:PORT) instead of starting one.")] = None,
    data_dir: Annotated[Optional[str], typer.Option(
        "--data-dir", metavar="DIR", show_default=False,
        help="Keep jobs and logs here so they survive a restart. Default: in memory.")] = None,
    max_running: Annotated[int, typer.Option("--max-running", metavar="N",
                                             help="Jobs that prepare or run at once; the rest queue.")] = 2,
    bucket: Annotated[Optional[List[str]], typer.Option(
        "--bucket", metavar="NAME", show_default=False,
        help="Create this bucket in the Cloud Storage emulator on start (repeatable), e.g. for --staging-bucket "
             "gs://NAME.")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", help="Do not log each request on stderr.")] = False,
    preempt_spot_after: Annotated[Optional[float], typer.Option(
        "--preempt-spot-after", metavar="SECONDS", show_default=False,
        help="Preempt spot jobs (scheduling.strategy SPOT) this long after their replicas start: every replica is "
             "stopped and the job starts again with the same AIP_CHECKPOINT_DIR, as Vertex AI restarts a preempted "
             "spot job.")] = None,
    preempt_spot_times: Annotated[int, typer.Option(
        "--preempt-spot-times", metavar="N", help="Preempt each spot job at most N times.")] = 2,
    no_quota: Annotated[Optional[List[str]], typer.Option(
        "--no-quota", metavar="REGION[/ACCELERATOR]", show_default=False,
        help="Refuse creates there (with that accelerator) as the service does without quota: 429 "
             "RESOURCE_EXHAUSTED; repeatable. Also POST /emulator/v1/capacity.")] = None,
    stockout: Annotated[Optional[List[str]], typer.Option(
        "--stockout", metavar="REGION[/ACCELERATOR]", show_default=False,
        help="Have no machines there (with that accelerator): jobs fail before they run, RESOURCE_EXHAUSTED; a "
             "FLEX_START job waits until DELETE /emulator/v1/capacity or its maxWaitDuration; repeatable.")] = None,
    kube_port: Annotated[Optional[int], typer.Option(
        "--kube-port", metavar="K", show_default=False,
        help="Also serve an emulated Kubernetes API (HTTPS) on this port of 127.0.0.1 (0: any free port) whose Jobs' "
             "pods run here; it answers only to the token in the kubeconfig it prints: `export KUBECONFIG=…`, then "
             "kubectl or `train --target kubernetes`. Needs mlsubmit[kubernetes].")] = None,
) -> None:
    """Serve a local emulator of the training service — Vertex AI custom jobs, legacy AI Platform jobs and their
    Cloud Logging entries, over the real REST API — that runs every accepted job for real."""
    _port(port, "--port")
    if gcs_port is not None and gcs_endpoint is not None:
        raise UsageError("received both --gcs-port and --gcs-endpoint; expected at most one",
                         hint="--gcs-port starts a Cloud Storage emulator, --gcs-endpoint uses a running one")
    if max_running < 1:
        raise invalid_value("--max-running", max_running, "a whole number >= 1")
    buckets = tuple(dict.fromkeys(_bucket(name) for name in bucket or ()))
    if preempt_spot_after is not None and not (0 < preempt_spot_after < 1e9):  # also refuses nan and inf
        raise invalid_value("--preempt-spot-after", preempt_spot_after, "a number of seconds > 0")
    if preempt_spot_times < 0:
        raise invalid_value("--preempt-spot-times", preempt_spot_times, "a whole number >= 0")
    from mlsubmit.emulator.capacity import Capacity

    try:
        capacity = Capacity(quota=tuple(no_quota or ()), stockout=tuple(stockout or ()))
    except ValueError as err:
        raise UsageError(f"invalid value for {err}") from None
    from mlsubmit.emulator.serve import serve

    gcs = _check_gcs_endpoint(gcs_endpoint) if gcs_endpoint else None
    kube = _start_kube(_port(kube_port, "--kube-port")) if kube_port is not None else None
    try:  # announced only once `kube` is held here: a Ctrl-C right after the line still stops it and removes its folder
        if kube is not None:
            typer.echo(f"Kubernetes API on {kube.url} (answers only to the token in its kubeconfig, readable by you "
                       f"alone): export KUBECONFIG={kube.kubeconfig}   then kubectl apply -f FILE, or train --target "
                       "kubernetes")
        serve(port=port, gcs_endpoint=gcs, gcs_port=_port(gcs_port, "--gcs-port") if gcs_port is not None else 0,
              data_dir=data_dir, max_running=max_running, buckets=buckets,
              ready=functools.partial(_say_ready, capacity=capacity), log_requests=not quiet,
              preempt_spot=(preempt_spot_after, preempt_spot_times), capacity=capacity)
    finally:
        if kube is not None:
            kube.stop()


def _start_kube(port: int):
    try:
        import cryptography  # noqa: F401  (its certificate)
        import kubernetes_validate  # noqa: F401  (what it checks objects against)
    except ImportError as err:
        raise UsageError(f"--kube-port needs the {err.name} package, which is not installed",
                         hint="pip install 'mlsubmit[kubernetes]'") from None
    from mlsubmit.emulator.kube_api import KubeServer

    try:
        return KubeServer(port).start()
    except OSError as err:
        raise invalid_value("--kube-port", port, "a free port of 127.0.0.1", hint=err.strerror) from None


def register(app: typer.Typer) -> None:
    app.command("emulator")(emulator_command)
