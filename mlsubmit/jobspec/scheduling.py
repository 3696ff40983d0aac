"""How a job gets its capacity on Vertex AI: wait for it (FLEX_START), draw it from a reservation, and what the
service does when a worker restarts. Frozen, validated, rendered as the API's fields; pure.

Facts (Vertex AI "Schedule training jobs based on resource availability", cloud.google.com/vertex-ai/docs/training/
schedule-jobs-dws, read 2026-11-28; aiplatform v1 discovery revision 20261106):
- `scheduling.strategy: FLEX_START` (Dynamic Workload Scheduler) is for jobs that request L4, A100, H100, H200 or
  B200 GPUs, whose timeout is 7 days or less, and whose worker pools all use the same machine configuration.
- `scheduling.maxWaitDuration` is how long such a job waits for its resources; 0 waits indefinitely; the default
  is 24 hours. Google documents no maximum: only a google.protobuf.Duration's own limit applies.
- `scheduling.disableRetries: true` overrides `restartJobOnWorkerRestart` to false (so both at once is refused
  here: the second would be silently dropped).
- `machineSpec.reservationAffinity {reservationAffinityType, key, values}`: NO_RESERVATION | ANY_RESERVATION |
  SPECIFIC_RESERVATION; a specific one is named with key `compute.googleapis.com/reservation-name` and the
  reservation's resource name as its value. gcloud spells the flag `--reservation-affinity
  reservation-affinity-type=…,key=…,values=…` (`gcloud ai endpoints deploy-model`); Compute Engine's
  `--reservation NAME` names one specific reservation.

Example:
    >>> Capacity(flex_start=True, max_wait_seconds=3600).scheduling()
    {'strategy': 'FLEX_START', 'maxWaitDuration': '3600s'}
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from mlsubmit.errors import UsageError, invalid_value

FLEX_START_GPUS = ("NVIDIA_L4", "NVIDIA_TESLA_A100", "NVIDIA_A100_80GB", "NVIDIA_H100_80GB", "NVIDIA_H100_MEGA_80GB",
                   "NVIDIA_H200_141GB", "NVIDIA_B200")  # the page's "L4, A100, H100, H200, or B200"
FLEX_START_MAX_TIMEOUT = 7 * 24 * 3600
DEFAULT_MAX_WAIT_SECONDS = 24 * 3600  # the service's default wait
RESERVATION_TYPES = ("NO_RESERVATION", "ANY_RESERVATION", "SPECIFIC_RESERVATION")
RESERVATION_KEY = "compute.googleapis.com/reservation-name"
_RESERVATION_NAME = re.compile(r"(projects/[a-z0-9-]{1,63}/zones/[a-z0-9-]{1,63}/reservations/)?"
                               r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?(/reservationBlocks/[-a-z0-9]{1,63}"
                               r"(/reservationSubBlocks/[-a-z0-9]{1,63})?)?")


@dataclass(frozen=True)
class Reservation:
    """machineSpec.reservationAffinity: which reservations the job's machines may be drawn from."""

    kind: str
    key: str | None = None
    values: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "values", tuple(self.values))
        if self.kind not in RESERVATION_TYPES:
            raise invalid_value("--reservation-affinity", f"reservation-affinity-type={self.kind}",
                                "one of " + ", ".join(RESERVATION_TYPES))
        if self.kind == "SPECIFIC_RESERVATION":
            if self.key != RESERVATION_KEY or not self.values:
                raise invalid_value("--reservation-affinity", self.text(), f"key={RESERVATION_KEY} and "
                                    "values=RESERVATION with SPECIFIC_RESERVATION",
                                    hint="or name it: --reservation NAME")
            for value in self.values:
                if not _RESERVATION_NAME.fullmatch(value):
                    raise invalid_value("--reservation", value, "a reservation name or "
                                        "projects/PROJECT/zones/ZONE/reservations/NAME")
        elif self.key or self.values:
            raise invalid_value("--reservation-affinity", self.text(), f"no key or values with {self.kind}")

    def text(self) -> str:
        said = f"reservation-affinity-type={self.kind}"
        if self.key:
            said += f",key={self.key}"
        if self.values:
            said += ",values=" + ";".join(self.values)
        return said

    def body(self) -> dict[str, Any]:
        out: dict[str, Any] = {"reservationAffinityType": self.kind}
        if self.key:
            out["key"] = self.key
        if self.values:
            out["values"] = list(self.values)
        return out


def parse_reservation_affinity(text: str) -> Reservation:
    """gcloud's `--reservation-affinity reservation-affinity-type=TYPE[,key=KEY,values=V1;V2]`."""
    fields: dict[str, str] = {}
    for item in str(text).split(","):
        name, sep, value = item.partition("=")
        if not sep or name.strip() not in ("reservation-affinity-type", "key", "values") or name.strip() in fields:
            raise invalid_value("--reservation-affinity", text, "reservation-affinity-type=TYPE[,key=KEY,"
                                "values=V1;V2] as gcloud takes it",
                                hint="e.g. --reservation-affinity reservation-affinity-type=ANY_RESERVATION")
        fields[name.strip()] = value.strip()
    if "reservation-affinity-type" not in fields:
        raise invalid_value("--reservation-affinity", text, "a reservation-affinity-type=… field")
    values = tuple(v for v in fields.get("values", "").split(";") if v)
    return Reservation(fields["reservation-affinity-type"].upper(), fields.get("key") or None, values)


def named_reservation(name: str) -> Reservation:
    """`--reservation NAME`: that specific reservation (an empty NAME is refused, never read as none)."""
    if not str(name).strip():
        raise invalid_value("--reservation", name, "a reservation name or projects/PROJECT/zones/ZONE/reservations/"
                            "NAME", hint="drop --reservation to draw from no reservation")
    return Reservation("SPECIFIC_RESERVATION", RESERVATION_KEY, (str(name).strip(),))


def reservation_zone(value: str) -> str | None:
    """The zone a reservation's resource name places it in ('projects/p/zones/us-central1-a/reservations/r' ->
    'us-central1-a'); None for a bare name (the service looks for it in the job's region)."""
    found = re.match(r"projects/[^/]+/zones/([^/]+)/", value)
    return found.group(1) if found else None


def zone_region(zone: str) -> str:
    """'us-central1-a' -> 'us-central1' (a Compute Engine zone is its region and one letter)."""
    return zone.rsplit("-", 1)[0]


def refuse_without_scheduling(capacity: "Capacity", where: str, why: str, instead: str) -> None:
    """One line when `capacity` sets anything and the place the job goes (`where`) has no such settings."""
    given = capacity.given()
    if given:
        raise UsageError(f"invalid option for {where}: {given[0]} ({why})", hint=f"drop {given[0]}, or {instead}")


def reservation_from_body(affinity: dict[str, Any] | None) -> Reservation | None:
    if not affinity:
        return None
    kind = affinity.get("reservationAffinityType")
    if kind in (None, "TYPE_UNSPECIFIED"):
        return None
    return Reservation(str(kind), affinity.get("key") or None, tuple(str(v) for v in affinity.get("values") or ()))


@dataclass(frozen=True)
class Capacity:
    """How the job asks for capacity. Empty (the default) sends nothing: the service's own defaults apply.

    Attributes:
        flex_start: wait for the resources (scheduling.strategy FLEX_START) instead of failing without them.
        max_wait_seconds: how long to wait (maxWaitDuration; 0: indefinitely; None: the service's 24 hours).
        reservation: the pools' reservationAffinity, or None.
        disable_retries: scheduling.disableRetries.
        restart_job_on_worker_restart: scheduling.restartJobOnWorkerRestart.
    """

    flex_start: bool = False
    max_wait_seconds: int | None = None
    reservation: Reservation | None = None
    disable_retries: bool = False
    restart_job_on_worker_restart: bool = False
    names: dict[str, str] = field(default_factory=dict, compare=False, hash=False)  # field -> how the user said it

    @property
    def empty(self) -> bool:
        return self == Capacity()

    def flag(self, key: str) -> str:
        return self.names.get(key) or {"flex_start": "--flex-start", "max_wait_seconds": "--max-wait-duration",
                                       "disable_retries": "--disable-retries",
                                       "restart_job_on_worker_restart": "--restart-job-on-worker-restart",
                                       "reservation": "--reservation-affinity"}[key]

    def given(self) -> list[str]:
        """The settings given, as flags (for errors on services that have none of them)."""
        return [self.flag(key) for key in ("flex_start", "max_wait_seconds", "reservation", "disable_retries",
                                           "restart_job_on_worker_restart")
                if getattr(self, key) not in (None, False)]

    def scheduling(self) -> dict[str, Any]:
        """The scheduling fields this adds (strategy, maxWaitDuration, disableRetries, restartJobOnWorkerRestart)."""
        out: dict[str, Any] = {}
        if self.flex_start:
            out["strategy"] = "FLEX_START"
        if self.max_wait_seconds is not None:
            out["maxWaitDuration"] = f"{self.max_wait_seconds}s"
        if self.disable_retries:
            out["disableRetries"] = True
        if self.restart_job_on_worker_restart:
            out["restartJobOnWorkerRestart"] = True
        return out

    def check(self, spec: Any) -> None:
        """What the service refuses, refused here first (one line each). `spec` is the JobSpec."""
        if self.max_wait_seconds is not None and not self.flex_start:
            raise UsageError(f"invalid value for {self.flag('max_wait_seconds')}: received {self.max_wait_seconds}s; "
                             "a wait for capacity needs the FLEX_START strategy",
                             hint="add --flex-start, or drop the wait")
        self._check_zone(spec.region)
        if self.disable_retries and self.restart_job_on_worker_restart:
            raise UsageError(f"invalid options: {self.flag('disable_retries')} overrides "
                             f"{self.flag('restart_job_on_worker_restart')} to false (the API's rule); received both",
                             hint="keep one of them")
        if not self.flex_start:
            return
        if spec.spot:
            raise UsageError(f"invalid options: {self.flag('flex_start')} and --spot are two scheduling strategies; "
                             "a job has one", hint="drop one of them")
        configs = {(p.machine_type, p.accelerator) for p in spec.pools.values()}
        if len(configs) > 1:
            said = ", ".join(f"{role} {p.machine_type}" + (f" + {p.accelerator[1]} {p.accelerator[0]}"
                                                           if p.accelerator else "") for role, p in spec.pools.items())
            raise UsageError(f"invalid value for {self.flag('flex_start')}: FLEX_START needs the same machine "
                             f"configuration for every worker pool; received {said}",
                             hint="give every role the chief's machine (--worker-machine-type, --ps-machine-type)")
        for role, pool in spec.pools.items():
            accelerator = pool.accelerator
            if not accelerator or accelerator[0] not in FLEX_START_GPUS:
                got = f"{pool.machine_type} + {accelerator[1]} {accelerator[0]}" if accelerator else \
                    f"{pool.machine_type} without GPUs"
                raise UsageError(f"invalid value for {self.flag('flex_start')}: Vertex AI's FLEX_START (Dynamic "
                                 f"Workload Scheduler) serves L4, A100, H100, H200 and B200 GPUs; received {got}",
                                 hint="use --gpu-type NVIDIA_L4, NVIDIA_H100_80GB, … or drop --flex-start")
        if spec.max_runtime_seconds is not None and spec.max_runtime_seconds > FLEX_START_MAX_TIMEOUT:
            raise invalid_value("--max-runtime", f"{spec.max_runtime_seconds}s", f"at most {FLEX_START_MAX_TIMEOUT}s "
                                "(7 days) with FLEX_START")

    def _check_zone(self, region: str) -> None:
        """A reservation lives in one zone; a job's machines come from its own region: another region's zone is
        one the service can never draw from (refused here, not after the queue)."""
        for value in self.reservation.values if self.reservation is not None else ():
            zone = reservation_zone(value)
            if zone is not None and zone_region(zone) != region:
                raise UsageError(f"invalid value for {self.flag('reservation')}: received {value!r}, a reservation "
                                 f"in {zone}; expected one in a zone of {region}, the job's region (a job draws "
                                 "only from reservations in its own region)",
                                 hint=f"use --region {zone_region(zone)}, or a reservation in {region}")

    def wait_text(self) -> str:
        """'up to 2h00m00s' / 'indefinitely' / 'up to 24h (the service's default)'."""
        if self.max_wait_seconds == 0:
            return "indefinitely"
        if self.max_wait_seconds is None:
            return "up to 24h (the service's default)"
        hours, rest = divmod(self.max_wait_seconds, 3600)
        return f"up to {hours}h{rest // 60:02d}m{rest % 60:02d}s" if hours else \
            f"up to {rest // 60}m{rest % 60:02d}s"


def parse_wait(value: Any, field_name: str = "--max-wait-duration") -> int:
    """A wait for capacity in seconds: a duration such as 2h or 90m, or 0 (wait indefinitely)."""
    from mlsubmit.jobspec.spec_input import parse_duration

    text = str(value).strip().lower()
    if text in ("0", "0s"):
        return 0
    return parse_duration(value, field_name)


def of_resource(resource: dict[str, Any], state: str, started: bool) -> dict[str, Any] | None:
    """What a job's own resource says about its capacity, for `jobs describe`: {"strategy", "waiting",
    "max_wait", "reservation", "disable_retries", "restart_job_on_worker_restart"}; None when it set none of them.
    A FLEX_START job that has not started and has not ended is waiting for capacity."""
    spec = resource.get("jobSpec") or resource.get("trialJobSpec") or {}
    scheduling = spec.get("scheduling") or {}
    affinities = [((pool or {}).get("machineSpec") or {}).get("reservationAffinity")
                  for pool in spec.get("workerPoolSpecs") or ()]
    reservation = reservation_from_body(next((a for a in affinities if a), None))
    strategy = scheduling.get("strategy")
    if not (strategy or reservation or scheduling.get("disableRetries") or scheduling.get("restartJobOnWorkerRestart")):
        return None
    wait = scheduling.get("maxWaitDuration")
    waited = None if wait is None else int(float(str(wait).rstrip("s") or 0))
    return {"strategy": strategy, "max_wait_seconds": waited,
            "waiting": strategy == "FLEX_START" and not started and state in ("QUEUED", "PREPARING"),
            "reservation": reservation.text() if reservation else None,
            "disable_retries": bool(scheduling.get("disableRetries")),
            "restart_job_on_worker_restart": bool(scheduling.get("restartJobOnWorkerRestart"))}


def capacity_text(found: dict[str, Any]) -> str:
    """One line for `jobs describe`: 'waiting for capacity (FLEX_START, up to 2h00m00s); reservation …'."""
    parts = []
    strategy = found.get("strategy")
    if strategy == "FLEX_START":
        wait = Capacity(flex_start=True, max_wait_seconds=found.get("max_wait_seconds")).wait_text()
        parts.append(f"waiting for capacity (FLEX_START: Dynamic Workload Scheduler, {wait})" if found["waiting"]
                     else f"FLEX_START (waits for capacity {wait})")
    elif strategy:
        parts.append(str(strategy))
    if found.get("reservation"):
        parts.append(f"reservation {found['reservation']}")
    if found.get("disable_retries"):
        parts.append("no retries after internal errors")
    if found.get("restart_job_on_worker_restart"):
        parts.append("the whole job restarts when a worker restarts")
    return "; ".join(parts)
