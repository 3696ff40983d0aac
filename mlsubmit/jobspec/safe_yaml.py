"""Read a user's YAML file with bounds: size, encoding, nesting, alias expansion and duplicate keys.

PyYAML's safe loader accepts documents no job config needs and that hurt: a 100 KB file whose aliases nest
("billion laughs") expands to hundreds of MB for whoever walks it, a deeply nested one overflows Python's stack,
and a key given twice silently keeps its last value. `load_file` refuses each, before anything is built from
the document, with one UsageError naming the file and, where there is one, the line:

- more than MAX_BYTES (the Google APIs' 1.5 MB request limit): refused from the file size, without parsing;
- bytes that are not UTF-8;
- nesting deeper than MAX_DEPTH, counted while composing (and through aliases afterwards);
- aliases that expand the document to more than MAX_EXPANDED nodes, or an alias inside its own anchor;
- a key given twice in one mapping (`<<` merge keys may still be overridden, as YAML intends).

Example:
    >>> load_file("job.yaml", "--config")
    {'trainingInput': {'scaleTier': 'BASIC'}}
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mlsubmit.errors import UsageError, invalid_value

MAX_BYTES = 1_572_864  # 1.5 MiB: the largest request body the Google APIs take
MAX_DEPTH = 100  # a job config is a few levels deep
MAX_EXPANDED = 100_000  # nodes after expanding aliases, when aliases made the document bigger


def load_file(path: str | Path, field: str) -> Any:
    """The document in the YAML file at `path`, read as `field` (e.g. "--config") names it in errors.

    Raises:
        UsageError: unreadable, too big, not UTF-8, malformed, too deep, an alias bomb, or a duplicate key.
    """
    import yaml

    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_BYTES + 1)
    except (OSError, ValueError) as err:  # ValueError: a NUL in the path
        raise invalid_value(field, str(path), "a readable YAML file",
                            hint=getattr(err, "strerror", None) or str(err)) from None
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


def _refused(problem: str, mark: Any, hint: str):
    import yaml

    error = yaml.MarkedYAMLError(problem=problem, problem_mark=mark)
    error.hint = hint  # type: ignore[attr-defined]
    return error


def _loader_class():
    import yaml
    from yaml.nodes import MappingNode, ScalarNode

    class BoundedLoader(yaml.SafeLoader):
        """SafeLoader that counts depth while composing, refuses duplicate keys, and checks aliases' expansion."""

        def __init__(self, stream: Any) -> None:
            super().__init__(stream)
            self._depth = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            self._depth += 1
            try:
                if self._depth > MAX_DEPTH:
                    raise _refused(f"nested deeper than {MAX_DEPTH} levels", self.peek_event().start_mark,
                                   "a job config is a few levels deep: check the file")
                return super().compose_node(parent, index)
            finally:
                self._depth -= 1

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
            _check_expansion(node, MappingNode)
            return node

    return BoundedLoader


def _check_expansion(root: Any, mapping_node: type) -> None:
    """Count the nodes and depth of the document with every alias expanded, without expanding it."""
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        children = _children(node, mapping_node)
        if children_done:
            on_path.discard(key)
            size[key] = min(1 + sum(size[id(c)] for c in children), MAX_EXPANDED + 1)  # enough to refuse
            depth[key] = 1 + max((depth[id(c)] for c in children), default=0)
            continue
        if key in size:
            continue
        on_path.add(key)
        stack.append((node, True))
        for child in children:
            if id(child) in on_path:
                raise _refused("an alias refers to the node that holds it (a recursive document)",
                               child.start_mark, "write the values out instead")
            if id(child) not in size:
                stack.append((child, False))
    expanded, distinct = size[id(root)], len(size)
    if expanded > distinct and expanded > MAX_EXPANDED:
        raise _refused(f"its aliases expand it to more than {MAX_EXPANDED} nodes", None,
                       "write the values out instead of nesting aliases")
    if depth[id(root)] > MAX_DEPTH:
        raise _refused(f"its aliases nest it deeper than {MAX_DEPTH} levels", None,
                       "write the values out instead of nesting aliases")


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
