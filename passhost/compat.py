"""The plugin API's version, and the range a plugin declares it works with.

``passhost.API_VERSION`` (``"MAJOR.MINOR"``) versions what plugins use: the records and
hooks of :mod:`passhost.hookspecs`, :mod:`passhost.transform`, :mod:`passhost.ir` and
:mod:`passhost.options`. A minor release only adds; a major release may break. It is
separate from the distribution's version, so a host bug-fix release never looks
incompatible.

A plugin states the range it supports as a module attribute of its entry-point module,
in the syntax of a pip requirement::

    PASSHOST_API = ">=1.0,<2"

A plugin whose range excludes the running host is listed by ``passhost list`` as broken,
with both versions and what to do, and everything else keeps working. A plugin that
declares nothing is assumed compatible (there was nothing to declare before 1.0).
"""
from __future__ import annotations

import re
from typing import Any, Optional

__all__ = ["API_VERSION", "ATTRIBUTE", "parse_range", "in_range", "incompatibility"]

#: the version of the plugin API this host provides
API_VERSION = "1.0"
#: the module attribute a plugin declares its supported range in
ATTRIBUTE = "PASSHOST_API"

_CLAUSE = re.compile(r"\s*(==|!=|>=|<=|~=|>|<)\s*(\d+(?:\.\d+)*)(\.\*)?\s*")


def _key(version: str, width: int = 3) -> tuple:
    parts = [int(p) for p in version.split(".")]
    return tuple(parts + [0] * (width - len(parts)))[:max(width, len(parts))]


def parse_range(spec: Any) -> list:
    """``">=1.0,<2"`` as ``[(">=", "1.0", False), ("<", "2", False)]`` (the flag: a ``.*`` wildcard).

    :raises ValueError: if ``spec`` is not such a string
    """
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"{ATTRIBUTE} must be a version range such as '>=1.0,<2', got {spec!r}")
    clauses = []
    for part in spec.split(","):
        m = _CLAUSE.fullmatch(part)
        if m is None or (m.group(3) and m.group(1) not in ("==", "!=")):
            raise ValueError(f"{ATTRIBUTE} = {spec!r} is not a version range: cannot read {part.strip()!r} "
                             "(clauses are ==, !=, >=, <=, >, < or ~= and a version such as 1.0, separated by commas)")
        clauses.append((m.group(1), m.group(2), bool(m.group(3))))
    return clauses


def in_range(version: str, spec: str) -> bool:
    """Whether ``version`` (``"1.0"``) is in the range ``spec`` (``">=1.0,<2"``)."""
    v = _key(version)
    for op, bound, wildcard in parse_range(spec):
        b = _key(bound)
        if wildcard:
            n = len(bound.split("."))
            same = v[:n] == b[:n]
            ok = same if op == "==" else not same
        elif op == "~=":
            n = len(bound.split("."))
            ok = v >= b and v[:max(n - 1, 1)] == b[:max(n - 1, 1)]
        else:
            ok = {"==": v == b, "!=": v != b, ">=": v >= b, "<=": v <= b, ">": v > b, "<": v < b}[op]
        if not ok:
            return False
    return True


def incompatibility(plugin: Any) -> Optional[str]:
    """Why ``plugin`` (an entry-point module or plugin object) cannot load here, or ``None``."""
    try:
        spec = getattr(plugin, ATTRIBUTE, None)
    except Exception:  # a hostile __getattr__: the hooks' checks will say what is wrong
        return None
    if spec is None:
        return None
    try:
        ok = in_range(API_VERSION, spec)
    except ValueError as err:
        return str(err)
    if ok:
        return None
    from . import __version__

    return (f"it supports passhost API {spec}, and this passhost ({__version__}) provides API {API_VERSION}; "
            f"install a release of the plugin made for API {API_VERSION.split('.')[0]}.x, or a passhost it supports")
