"""Read a user's YAML file bounded by what it expands to: size, values, nesting, aliases, numbers, duplicate keys.

PyYAML's safe loader accepts documents no job config needs and that hurt: a 100 KB file whose aliases nest
("billion laughs") expands to hundreds of MB for whoever walks it, a deeply nested one overflows Python's stack,
and a key given twice silently keeps its last value. `load_file` refuses each, before anything is built from
the document, with one UsageError naming the file and, where there is one, the line:

- more than MAX_BYTES (the Google APIs' 1.5 MB request limit): refused from the file size, without parsing;
- bytes that are not UTF-8;
- nesting deeper than MAX_DEPTH, counted while composing, through aliases too;
- more than MAX_NODES values written out (1.5 MiB of `[1,1,1,…]` is 780,000 of them: minutes of PyYAML's
  pure-Python parser and 650 MB), refused at the first one past the limit;
- aliases that expand the document to more than MAX_BYTES of scalar text (one 100 KB string used 2,000 times is
  200 MB once expanded, though the file is 108 KB) or more than MAX_EXPANDED nodes, or an alias inside its own
  anchor. Counted while composing — each alias adds the size of the node it names — so the refusal comes at the
  first alias past a limit, in milliseconds, before anything walks the expanded document;
- a key given twice in one mapping (`<<` merge keys may still be overridden, as YAML intends);
- an integer longer than MAX_NUMBER characters (YAML 1.1's base-60 `1:2:3` ints cost quadratic time to build).

Example:
    >>> load_file("job.yaml", "--config")
    {'trainingInput': {'scaleTier': 'BASIC'}}
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mlsubmit.errors import UsageError, invalid_value
from mlsubmit.jobspec.limits import MAX_REQUEST_BYTES

MAX_BYTES = MAX_REQUEST_BYTES  # 1.5 MiB: the largest request body the Google APIs take
MAX_DEPTH = 100  # a job config is a few levels deep
MAX_EXPANDED = 100_000  # nodes after expanding aliases, when aliases made the document bigger
MAX_NODES = 10_000  # nodes written in the file: a job config has hundreds; PyYAML takes ~1 s per 10,000
MAX_NUMBER = 100  # characters of an integer scalar (int64 is 19 digits; 0b… with underscores is longer)


def load_file(path: str | Path, field: str) -> Any:
    """The document in the YAML file at `path`, read as `field` (e.g. "--config") names it in errors.

    Raises:
        UsageError: unreadable, too big, not UTF-8, malformed, too deep, an alias bomb, or a duplicate key.
    """
    import yaml

    raw = _read(path, field)
    if len(raw) > MAX_BYTES:
        raise UsageError(f"invalid {field} {path}: larger than {MAX_BYTES} bytes; expected at most 1.5 MiB "
                         "(the API's request size limit)", hint="a job config is a few KB: check the file")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise UsageError(f"invalid {field} {path}: not UTF-8 text (byte 0x{raw[err.start]:02x} at offset "
                         f"{err.start}); expected a UTF-8 YAML file", hint="save it as UTF-8") from None
    try:
        return yaml.load(text, Loader=_BoundedLoader)  # noqa: S506 (a SafeLoader)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise UsageError(f"invalid YAML in {field} {path}{where}: {problem}",
                         hint=getattr(err, "hint", "check indentation and quoting")) from None


# what a pipe (`--config /dev/stdin`, `<(…)`) gave: it can be read once, and one command reads its file twice (the
# job, then its tuning spec), so the second read gets the same bytes
_STREAMS: dict[str, bytes] = {}


def _read(path: str | Path, field: str) -> bytes:
    import os
    import stat

    key = os.fspath(path) if isinstance(path, (str, Path)) else str(path)
    if key in _STREAMS:
        return _STREAMS[key]
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_BYTES + 1)
            regular = stat.S_ISREG(os.fstat(handle.fileno()).st_mode)
    except (OSError, ValueError) as err:  # ValueError: a NUL in the path
        raise invalid_value(field, str(path), "a readable YAML file",
                            hint=getattr(err, "strerror", None) or str(err)) from None
    if not regular:
        _STREAMS[key] = raw
    return raw


def _refused(problem: str, mark: Any, hint: str):
    import yaml

    error = yaml.MarkedYAMLError(problem=problem, problem_mark=mark)
    error.hint = hint  # type: ignore[attr-defined]
    return error


def _loader_class():
    import yaml
    from yaml.events import AliasEvent
    from yaml.nodes import MappingNode, ScalarNode

    class BoundedLoader(yaml.SafeLoader):
        """SafeLoader that refuses duplicate keys and bounds depth and size — aliases expanded — while composing."""

        def __init__(self, stream: Any) -> None:
            super().__init__(stream)
            self._depth = 0
            self._size: dict[int, tuple[int, int, int]] = {}  # id(node): (nodes, scalar bytes, depth), expanded
            self._total = [0, 0]  # nodes and scalar bytes of the document so far, aliases expanded
            self._aliases = False
            self._written = 0  # nodes written out in the file (PyYAML parses ~10,000 a second)

        def compose_node(self, parent: Any, index: Any) -> Any:
            self._depth += 1
            try:
                if self._depth > MAX_DEPTH:
                    raise _refused(f"nested deeper than {MAX_DEPTH} levels", self.peek_event().start_mark,
                                   "a job config is a few levels deep: check the file")
                alias = self.peek_event() if self.check_event(AliasEvent) else None
                self._written += alias is None
                if self._written > MAX_NODES:
                    raise _refused(f"more than {MAX_NODES} values (keys, items and scalars)",
                                   self.peek_event().start_mark, "a job config holds hundreds: check the file")
                node = super().compose_node(parent, index)
                if alias is not None:
                    self._expand(node, alias.start_mark)
                else:
                    self._finish(node)
                return node
            finally:
                self._depth -= 1

        def _finish(self, node: Any) -> None:
            """Record a node just composed: its own size, and what its children (aliases expanded) add up to."""
            if isinstance(node, ScalarNode):
                size = (1, len(node.value.encode("utf-8", "surrogatepass")), 1)
            else:
                children = [self._size[id(c)] for c in _children(node, MappingNode)]
                size = (1 + sum(c[0] for c in children), sum(c[1] for c in children),
                        1 + max((c[2] for c in children), default=0))
            self._size[id(node)] = size
            self._total[0] += 1
            self._total[1] += size[1] if isinstance(node, ScalarNode) else 0

        def _expand(self, node: Any, mark: Any) -> None:
            """An alias: the document grows by the whole of the node it names, checked before going on."""
            size = self._size.get(id(node))
            if size is None:  # the anchored node is still being composed: the alias is inside it
                raise _refused("an alias refers to the node that holds it (a recursive document)", mark,
                               "write the values out instead")
            self._aliases = True
            self._total[0] += size[0]
            self._total[1] += size[1]
            if self._depth - 1 + size[2] > MAX_DEPTH:
                raise _refused(f"its aliases nest it deeper than {MAX_DEPTH} levels", mark,
                               "write the values out instead of nesting aliases")
            self._check_total(mark)

        def _check_total(self, mark: Any) -> None:
            nodes, size = self._total
            if size > MAX_BYTES:
                raise _refused(f"its aliases expand it to more than {MAX_BYTES} bytes of text (1.5 MiB, the API's "
                               "request size limit)", mark, "every use of an alias counts: repeat long values less "
                               "often")
            if nodes > MAX_EXPANDED:
                raise _refused(f"its aliases expand it to more than {MAX_EXPANDED} nodes", mark,
                               "write the values out instead of nesting aliases")

        def construct_yaml_int(self, node: Any) -> Any:
            """An integer of at most MAX_NUMBER characters: PyYAML would turn `1:2:3:…` (base 60) of 200 KB into a
            number in quadratic time, and 5,000 digits into a ValueError from int()."""
            if len(node.value) > MAX_NUMBER:
                raise _refused(f"an integer of {len(node.value)} characters; expected at most {MAX_NUMBER} (the "
                               "APIs' numbers are int64: 19 digits)", node.start_mark, "quote it if it is text")
            return super().construct_yaml_int(node)

        def construct_object(self, node: Any, deep: bool = False) -> Any:
            """A value PyYAML's constructors cannot build (`2024-13-45` read as a date) is a marked error too."""
            try:
                return super().construct_object(node, deep)
            except (ValueError, OverflowError) as err:
                shown = node.value if len(node.value) <= 40 else f"{node.value[:40]}…"
                kind = node.tag.rsplit(":", 1)[-1]
                raise _refused(f"cannot read {shown!r} as a {kind}: {err}", node.start_mark,
                               "quote it if it is text") from None

        def compose_mapping_node(self, anchor: Any) -> Any:
            node = super().compose_mapping_node(anchor)
            seen: dict[tuple[str, str], Any] = {}
            for key, _ in node.value:
                if not isinstance(key, ScalarNode) or key.tag == "tag:yaml.org,2002:merge":
                    continue
                first = seen.setdefault((key.tag, key.value), key)
                if first is not key:
                    raise _refused(f"duplicate key {key.value!r} (first at line {first.start_mark.line + 1})",
                                   key.start_mark, "keep one of them: YAML would silently use the last")
            return node

        def compose_document(self) -> Any:
            node = super().compose_document()
            if self._aliases:
                self._check_total(None)
            self._size.clear()
            return node

    BoundedLoader.add_constructor("tag:yaml.org,2002:int", BoundedLoader.construct_yaml_int)
    return BoundedLoader


def _children(node: Any, mapping_node: type) -> list[Any]:
    if isinstance(node.value, list):
        return [part for pair in node.value for part in pair] if isinstance(node, mapping_node) else node.value
    return []


class _LazyLoader:
    """Builds the loader class on first use, so importing this module does not import PyYAML."""

    cls = None

    def __call__(self, stream: Any) -> Any:
        if _LazyLoader.cls is None:
            _LazyLoader.cls = _loader_class()
        return _LazyLoader.cls(stream)


_BoundedLoader = _LazyLoader()
