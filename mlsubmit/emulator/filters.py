"""The list filters of the emulated APIs: AIP-160 (`state=JOB_STATE_RUNNING AND labels.team="ml"`) and the
Cloud Logging query language subset gcloud sends (`resource.type="ml_job" AND resource.labels.job_id="x" AND
((timestamp="…" AND insertId>"…") OR timestamp>"…")`).

Grammar (both languages agree on it, including that OR binds tighter than AND):

    expression := sequence { "AND" sequence }        juxtaposed terms are ANDed too
    sequence   := factor { "OR" factor }
    factor     := ["NOT" | "-"] ( "(" expression ")" | restriction )
    restriction:= path operator value                 operators: = != < <= > >= : =~ !~
    path       := segment { "." segment }             a segment is a name or a "quoted string"

Each API describes its fields as a mapping from dotted name to a getter; a getter may return a dict (a map
field such as `labels`, addressed as `labels.KEY` or tested with `labels:KEY`), a datetime (compared with
timestamp literals), an int, a value whose type has a `from_literal` classmethod (severities), or a string.
An unknown field or a malformed filter is a 400 naming `filter`.

Example:
    >>> fields = Fields({"state": lambda j: j["state"], "labels": lambda j: j["labels"]}, maps=("labels",))
    >>> match = compile_filter('state=FAILED OR labels.team:*', fields)
    >>> match({"state": "RUNNING", "labels": {"team": "ml"}})
    True
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from mlsubmit.emulator.errors import ApiError, field_error
from mlsubmit.emulator.times import parse_time

Predicate = Callable[[Any], bool]
Getter = Callable[[Any], Any]
_OPERATORS = (">=", "<=", "!=", "=~", "!~", "=", "<", ">", ":")
_NAME = re.compile(r"[^\s.()=<>!:~\"]+")
_BARE_VALUE = re.compile(r"[^\s()\"]+")
_MAX_LENGTH = 20000


def compile_filter(text: str | None, fields: "Fields") -> Predicate:
    """A predicate for `text` over records whose fields `fields` reads; an empty filter matches everything.

    Raises:
        ApiError: 400 INVALID_ARGUMENT (field `filter`) for a syntax error or an unsupported field.
    """
    if not text or not text.strip():
        return lambda record: True
    if len(text) > _MAX_LENGTH:
        raise field_error("filter", f"the filter is longer than {_MAX_LENGTH} characters")
    parser = _Parser(text, fields)
    predicate = parser.expression()
    parser.skip_space()
    if parser.pos != len(text):
        parser.fail("unexpected text")
    return predicate


class _Parser:
    def __init__(self, text: str, fields: "Fields"):
        self.text, self.pos, self.fields = text, 0, fields

    def fail(self, what: str) -> None:
        shown = self.text[self.pos:self.pos + 30] or "the end"
        raise field_error("filter", f"invalid filter {self.text!r}: {what} at {shown!r} (column {self.pos + 1}); "
                                    f"supported fields: {self.fields.describe()}")

    def skip_space(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def keyword(self, word: str) -> bool:
        self.skip_space()
        end = self.pos + len(word)
        if self.text.startswith(word, self.pos) and (end == len(self.text) or self.text[end].isspace()
                                                      or self.text[end] == "("):
            self.pos = end
            return True
        return False

    def at_term_end(self) -> bool:
        self.skip_space()
        return self.pos >= len(self.text) or self.text[self.pos] == ")"

    # -- grammar ------------------------------------------------------------------------------------------------
    def expression(self) -> Predicate:
        terms = [self.sequence()]
        while not self.at_term_end():
            self.keyword("AND")
            terms.append(self.sequence())
        return terms[0] if len(terms) == 1 else (lambda record: all(term(record) for term in terms))

    def sequence(self) -> Predicate:
        factors = [self.factor()]
        while self.keyword("OR"):
            factors.append(self.factor())
        return factors[0] if len(factors) == 1 else (lambda record: any(f(record) for f in factors))

    def factor(self) -> Predicate:
        self.skip_space()
        if self.keyword("NOT") or self.text.startswith("-", self.pos) and self._advance(1):
            inner = self.factor()
            return lambda record: not inner(record)
        if self.text.startswith("(", self.pos):
            self.pos += 1
            inner = self.expression()
            self.skip_space()
            if not self.text.startswith(")", self.pos):
                self.fail("expected ')'")
            self.pos += 1
            return inner
        return self.restriction()

    def _advance(self, count: int) -> bool:
        self.pos += count
        return True

    def restriction(self) -> Predicate:
        start = self.pos
        path = self.path()
        self.skip_space()
        operator = next((op for op in _OPERATORS if self.text.startswith(op, self.pos)), None)
        if operator is None:
            self.pos = start
            self.fail("expected a comparison such as field=\"value\"")
        self.pos += len(operator)
        self.skip_space()
        value = self.value()
        return _comparison(self, path, operator, value)

    def path(self) -> list[str]:
        segments = [self.segment()]
        while self.text.startswith(".", self.pos):
            self.pos += 1
            segments.append(self.segment())
        return segments

    def segment(self) -> str:
        return self.word(_NAME, "a field name")

    def quoted(self) -> str:
        out, self.pos = [], self.pos + 1
        while self.pos < len(self.text):
            char = self.text[self.pos]
            if char == "\\" and self.pos + 1 < len(self.text):
                out.append(self.text[self.pos + 1])
                self.pos += 2
            elif char == '"':
                self.pos += 1
                return "".join(out)
            else:
                out.append(char)
                self.pos += 1
        self.fail("unterminated string")
        return ""

    def value(self) -> str:
        return self.word(_BARE_VALUE, "a value")

    def word(self, bare: re.Pattern, what: str) -> str:
        """A quoted string, or a run of characters `bare` allows."""
        if self.text.startswith('"', self.pos):
            return self.quoted()
        match = bare.match(self.text, self.pos)
        if not match:
            self.fail(f"expected {what}")
        self.pos = match.end()
        return match.group()


def _comparison(parser: _Parser, path: list[str], operator: str, literal: str) -> Predicate:
    getter, key = _resolve(parser, path)
    if key is None and operator != ":" and _is_map(parser, path):
        parser.fail(f"{'.'.join(path)} is a map: compare one key, as {'.'.join(path)}.KEY=\"value\"")

    def read(record: Any) -> Any:
        value = getter(record)
        if key is not None:
            return value.get(key) if isinstance(value, Mapping) else None
        return value

    if literal == "*" and operator in ("=", ":"):
        return lambda record: read(record) not in (None, "", {})
    if key is None and operator == ":" and _is_map(parser, path):
        return lambda record: literal in (getter(record) or {})
    pattern = None
    if operator in ("=~", "!~"):
        try:
            pattern = re.compile(literal)
        except re.error as err:
            parser.fail(f"invalid regular expression {literal!r} ({err})")
    cache: dict[type, Any] = {}

    def typed(sample: Any) -> Any:
        kind = type(sample)
        if kind not in cache:
            try:
                custom = getattr(kind, "from_literal", None)
                cache[kind] = custom(literal) if custom else parse_time(literal) if isinstance(sample, datetime) \
                    else int(literal) if isinstance(sample, int) else literal
            except ValueError as err:
                raise field_error("filter", f"invalid value for {'.'.join(path)}: {err}") from None
        return cache[kind]

    def test(record: Any) -> bool:
        value = read(record)
        if value is None:
            return operator in ("!=", "!~")
        if pattern is not None:
            return bool(pattern.search(str(value))) == (operator == "=~")
        other = typed(value)
        if operator == ":":
            return str(other).lower() in str(value).lower() if isinstance(value, str) else value == other
        return _ORDER[operator](value, other)

    return test


_ORDER = {"=": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b,
          "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b}


def _is_map(parser: _Parser, path: list[str]) -> bool:
    return ".".join(path) in parser.fields.maps


def _resolve(parser: _Parser, path: list[str]) -> tuple[Getter, str | None]:
    """The getter of the longest known prefix of `path` and the map key after it (None: the field itself)."""
    for cut in range(len(path), 0, -1):
        name = ".".join(path[:cut])
        if name in parser.fields:
            rest = path[cut:]
            if rest and name not in parser.fields.maps:
                break
            return parser.fields[name], ".".join(rest) if rest else None
    raise ApiError(400, f"Unsupported field {'.'.join(path)!r} in filter {parser.text!r}; supported fields: "
                        f"{parser.fields.describe()}", violations=[("filter", f"unsupported field {'.'.join(path)!r}")])


def time_field(key: str) -> Getter:
    """A getter for an RFC 3339 field of a rendered resource, compared as a time."""
    return lambda resource: parse_time(resource[key]) if resource.get(key) else None


class Fields(dict):
    """Field getters by dotted name; `maps` names the map fields (addressed as NAME.KEY)."""

    def __init__(self, getters: Mapping[str, Getter], maps: tuple[str, ...] = ()):
        super().__init__(getters)
        self.maps = maps

    def describe(self) -> str:
        return ", ".join(f"{name}.KEY" if name in self.maps else name for name in self)
