"""pip's ResolutionImpossible, read: a conflict with the image is named only when it is one.

pip explains a failed resolution with the requirements it could not satisfy together:

    The conflict is caused by:
        The user requested numpy==1.22.3
        The user requested (constraint) numpy<1.24,>=1.20

It says so too when the ranges overlap and the cause is elsewhere: numpy 1.22.3 satisfies `>=1.20,<1.24` but has no
release for Python 3.7 (pip 23.1+ adds "no matching distributions available" only for a project with no release for
that Python at all); termcolor `~=1.1.0` against the image's `~=1.1.0` has only a source distribution, which
`--only-binary` (the check's foreign-Python look-up) cannot take. So a line naming a requirement and the image's side
is a conflict only when no version satisfies both ranges (`packaging.specifiers`); otherwise the caller looks for the
true cause (mlsubmit.images.check: no release for the image's Python, only a source distribution). A real conflict
names both ranges: what the package asks for, and the one of the image's (its distribution's version, a requirement
of its framework, the image's pins) that excludes it. Pure functions.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

CAUSES = "The conflict is caused by:"
_DEPENDS = re.compile(r"^(?P<pkg>\S+) (?P<ver>\S+) depends on (?P<dep>.+)$")
_REQUESTED = re.compile(r"^The user requested (?P<constraint>\(constraint\) )?(?P<req>.+)$")


def name(requirement: str) -> str:
    """The canonical project name of a requirement as pip renders it."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    try:
        return canonicalize_name(Requirement(requirement).name)
    except Exception:  # noqa: BLE001 - pip's rendering of a requirement; the first word is its name
        return canonicalize_name(re.split(r"[\s<>=!~;\[(]", requirement.strip(), maxsplit=1)[0])


def causes(said: str) -> list[str]:
    """The lines under pip's "The conflict is caused by:" (none when pip said no such thing)."""
    if CAUSES not in said:
        return []
    lines = []
    for line in said.split(CAUSES, 1)[1].splitlines()[1:]:
        if not line.strip():
            break
        lines.append(line.strip())
    return lines


def requested(said: str, requirements: Sequence[str]) -> list[str]:
    """The package's own requirements that pip names in its conflict ("The user requested numpy==1.22.3"), as the
    package wrote them: where the ranges overlap, the true cause is to be found in one of these."""
    ours = {name(r): r for r in requirements}
    found = []
    for line in causes(said):
        match = _REQUESTED.match(line)
        if match and not match["constraint"] and name(match["req"]) in ours:
            found.append(ours[name(match["req"])])
    return list(dict.fromkeys(found))


def satisfiable(requirements: Sequence[str]) -> bool:
    """Whether one version satisfies every requirement (of one project) at once: each bound any of them names is
    tried (the lowest version a range allows is one of them where the ranges meet), and 0 for ranges with no lower
    bound. A requirement that cannot be read counts as not satisfiable (the conflict is said as pip said it)."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.version import InvalidVersion, Version

    try:
        specifiers = [Requirement(text).specifier for text in requirements]
    except InvalidRequirement:
        return False
    candidates = {Version("0")}
    for specifier in specifiers:
        for one in specifier:
            try:
                version = Version(one.version.removesuffix(".*"))
            except InvalidVersion:
                continue
            candidates.add(version)
            if one.operator in (">", "!="):  # just above it: ">2.17" and "!=2.17" allow 2.17.0.1
                candidates.add(Version(f"{version.base_version}.0.1"))
    return any(all(s.contains(c, prereleases=True) for s in specifiers) for c in candidates)


def _image_side(package: str, image_name: str, carried, pinned: Sequence[str]) -> list[tuple[str, str]]:
    """(the words, the requirement) of each range the image holds `package` to: its own distribution's version, its
    framework's requirements of it, the image's pins as pip applied them (constraints)."""
    side = []
    for item in carried:
        if name(item.name) == package:
            side.append((f"{image_name} carries {item.name} {item.version}", f"{package}=={item.version}"))
        side += [(f"{image_name} carries {item.name} {item.version}, which requires {requirement}", requirement)
                 for requirement in item.requires if name(requirement) == package]
    side += [(f"{image_name} holds it to {constraint} (the image's pins)", constraint) for constraint in pinned]
    return side


def conflict(said: str, requirements: Sequence[str], image_name: str, carried) -> str | None:
    """pip's ResolutionImpossible explanation as one line naming what the package asks for and the image's range that
    excludes it; None when it is not about the image's packages (a dependency without a wheel: the caller warns), or
    when the ranges overlap (not a conflict: the caller finds the true cause)."""
    ours = {name(r) for r in requirements}
    asks, pinned = [], {}
    for line in causes(said):
        depends, request = _DEPENDS.match(line), _REQUESTED.match(line)
        if depends:
            asks.append((name(depends["dep"]), depends["dep"], f"{depends['pkg']} {depends['ver']} (from the "
                                                                f"package's requirements) needs {depends['dep']}"))
        elif request and request["constraint"]:
            pinned.setdefault(name(request["req"]), []).append(request["req"])
        elif request and name(request["req"]) in ours:
            asks.append((name(request["req"]), request["req"], f"requirement {request['req']} would replace the "
                                                               f"image's {name(request['req'])}"))
    for package, asked, wanted in asks:
        side = _image_side(package, image_name, carried, pinned.get(package, ()))
        if not side or satisfiable([asked, *(requirement for _, requirement in side)]):
            continue  # not the image's package, or a version fits both: not a conflict
        excluding = next((words for words, requirement in side if not satisfiable([asked, requirement])), None)
        return f"{wanted}: {excluding or '; '.join(words for words, _ in side)}"
    return None
