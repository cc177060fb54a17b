"""The converter table: ``(domain, op_type)`` -> converters by the opset they start at.

As in TVM's ``from_onnx``, one operator has one converter per opset range: the converter
with the largest ``since`` not above the model's opset for that domain is used.
:func:`converter` registers this plugin's own converters; other plugins register theirs
through the host hook ``passhost_register_converters`` (``ConverterEntry(format="onnx", ...)``),
and theirs win over the built-in ones for the same ``(domain, op_type, since)``.
"""
from __future__ import annotations

import bisect
from typing import Callable, Optional

__all__ = ["converter", "lookup", "BUILTIN", "known_ops", "USE_BODY"]

#: (domain, op_type) -> sorted [(since, fn)]
BUILTIN: dict = {}


class _UseBody:
    __slots__ = ()

    def __repr__(self) -> str:
        return "USE_BODY"


#: what a converter returns for a node it does not map onto host operators exactly (an
#: attribute it has no operator for): the importer expands the node into its ONNX function
#: body instead, as it does for an operator without a converter
USE_BODY = _UseBody()


def _add(table: dict, domain: str, op_type: str, since: int, fn: Callable) -> None:
    entries = table.setdefault((domain, op_type), [])
    entries[:] = [e for e in entries if e[0] != since]
    bisect.insort(entries, (since, fn), key=lambda e: e[0])


def converter(op_type: str, since: int = 1, domain: str = "") -> Callable:
    """Register the decorated function as the converter of ``op_type`` from opset ``since``."""

    def register(fn: Callable) -> Callable:
        _add(BUILTIN, domain, op_type, since, fn)
        return fn

    return register


def merged(extra: list) -> dict:
    """The built-in table with other plugins' ``(domain, op_type, since, fn)`` on top."""
    if not extra:
        return BUILTIN
    table = {k: list(v) for k, v in BUILTIN.items()}
    for domain, op_type, since, fn in extra:
        _add(table, domain, op_type, since, fn)
    return table


def lookup(table: dict, domain: str, op_type: str, opset: int) -> Optional[Callable]:
    """The converter for ``op_type`` at ``opset``, or ``None``."""
    entries = table.get((domain, op_type))
    if not entries:
        return None
    found = None
    for since, fn in entries:
        if since <= opset:
            found = fn
    return found


def known_ops(table: dict) -> list:
    """``[(domain, op_type, first opset)]`` of every converter, sorted."""
    return sorted((d, o, v[0][0]) for (d, o), v in table.items())
