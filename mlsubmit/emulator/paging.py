"""Page tokens: opaque, bound to the query they came from, and stable while items are added between pages.

A token carries the sort key of the last item returned and a fingerprint of the query (filter, order,
parent); the next page starts after that key. A token from another query, or one that was edited, is a 400
naming `pageToken`, as the real services answer.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from mlsubmit.emulator.errors import field_error

T = TypeVar("T")


def page_size(value: Any, *, default: int, maximum: int) -> int:
    """The page size a request asked for (0 or absent: `default`; above `maximum`: `maximum`)."""
    if value in (None, ""):
        return default
    try:
        size = int(value)
    except (TypeError, ValueError):
        raise field_error("pageSize", f"expected an integer; received {value!r}") from None
    if size < 0:
        raise field_error("pageSize", f"must not be negative; received {size}")
    return min(size or default, maximum)


def paginate(items: Sequence[T], *, key: Callable[[T], Any], size: int, token: str | None, query: Any,
             descending: bool = False) -> tuple[list[T], str | None]:
    """One page of `items` (already sorted by `key`, ascending unless `descending`) and the next page's token."""
    fingerprint = hashlib.sha256(json.dumps(query, sort_keys=True, default=str).encode()).hexdigest()[:16]
    start = 0
    if token:
        after = _decode(token, fingerprint)
        start = next((i for i, item in enumerate(items)
                      if (key(item) < after if descending else key(item) > after)), len(items))
    page = list(items[start:start + size])
    more = start + size < len(items)
    return page, (_encode(key(page[-1]), fingerprint) if more and page else None)


def _encode(after: Any, fingerprint: str) -> str:
    return base64.urlsafe_b64encode(json.dumps({"after": after, "query": fingerprint}).encode()).decode()


def _decode(token: str, fingerprint: str) -> Any:
    try:
        state = json.loads(base64.urlsafe_b64decode(token.encode() + b"=" * (-len(token) % 4)))
        after, made_for = state["after"], state["query"]
    except (ValueError, TypeError, KeyError):
        raise field_error("pageToken", f"invalid page token {token[:40]!r}: use the nextPageToken of the "
                                       "previous response") from None
    if made_for != fingerprint:
        raise field_error("pageToken", "the page token belongs to a different query: keep the filter, order "
                                       "and parent of the request that returned it")
    return after
