"""RFC 3339 timestamps as the Google APIs write them (UTC, `Z`, microseconds), and a parser for filter literals."""

from __future__ import annotations

import re
import threading
from datetime import datetime, timedelta, timezone

_RFC3339 = re.compile(r"(\d{4})-(\d\d)-(\d\d)(?:[Tt ](\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?)?"
                      r"\s*(Z|z|[+-]\d\d:\d\d)?")
_lock = threading.Lock()
_last = datetime.min.replace(tzinfo=timezone.utc)


def format_time(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def now() -> str:
    """The current time, strictly later than any earlier call in this process (so timestamps order events)."""
    global _last
    with _lock:
        moment = max(datetime.now(timezone.utc), _last + timedelta(microseconds=1))
        _last = moment
    return format_time(moment)


def advance_past(text: str) -> None:
    """Make later `now()` calls come after `text` (timestamps loaded from disk after a restart)."""
    global _last
    moment = parse_time(text)
    with _lock:
        _last = max(_last, moment)


def parse_time(text: str) -> datetime:
    """An RFC 3339 timestamp (fractions beyond microseconds dropped; a bare date is midnight UTC).

    Raises:
        ValueError: not a timestamp.
    """
    match = _RFC3339.fullmatch(text.strip())
    if not match:
        raise ValueError(f"expected an RFC 3339 timestamp such as 2024-05-01T12:00:00Z; received {text!r}")
    year, month, day, hour, minute, second, fraction, offset = match.groups()
    micros = int((fraction or "0")[:6].ljust(6, "0"))
    zone = timezone.utc
    if offset and offset not in "Zz":
        sign = 1 if offset[0] == "+" else -1
        zone = timezone(sign * timedelta(hours=int(offset[1:3]), minutes=int(offset[4:6])))
    return datetime(int(year), int(month), int(day), int(hour or 0), int(minute or 0), int(second or 0), micros,
                    tzinfo=zone).astimezone(timezone.utc)
