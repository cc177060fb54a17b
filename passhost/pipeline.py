"""Pipelines: the ``"A,B(k=v)"`` text form and the default pipeline.

A pipeline text is a comma-separated list of registered pass names, each optionally
followed by keyword options in parentheses::

    FoldConstant,EliminateCommonSubexpr,FuseOps(fuse_opt_level=2)

Option values are Python literals read with :func:`ast.literal_eval` -- numbers,
strings, ``True``/``False``/``None``, tuples, lists, dicts, sets -- and are never
evaluated as code. A small tokenizer finds the separating commas, so values may nest
parentheses, brackets and strings (``Foo(axes=(1, 2), tag='a,b')``). The parsed
:class:`PipelineSpec` prints back as canonical text that parses to the same spec.
"""
from __future__ import annotations

import ast
import heapq
import re
import warnings
from dataclasses import dataclass
from typing import Any, Iterable, Sequence, Union

from . import transform
from .errors import PipelineError

__all__ = ["Pipeline", "PassSpec", "PipelineSpec", "parse_pipeline", "parse_element", "pipeline", "default_pipeline",
           "order_passes"]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_OPEN = {"(": ")", "[": "]", "{": "}"}
_CLOSE = {")": "(", "]": "[", "}": "{"}


@dataclass(frozen=True)
class PassSpec:
    """One pipeline element: a name and its options (in the order written)."""

    name: str
    options: tuple = ()

    @property
    def kwargs(self) -> dict:
        return dict(self.options)

    def __str__(self) -> str:
        if not self.options:
            return self.name
        return f"{self.name}({','.join(f'{k}={v!r}' for k, v in self.options)})"


@dataclass(frozen=True)
class PipelineSpec:
    """A parsed pipeline text; ``str(spec)`` is its canonical text."""

    passes: tuple = ()

    @property
    def names(self) -> list:
        return [p.name for p in self.passes]

    def __str__(self) -> str:
        return ",".join(str(p) for p in self.passes)


def _error(text: str, what: str, pos: int) -> PipelineError:
    return PipelineError(f"bad pipeline {text!r}: {what} at column {pos + 1}")


def _string_end(text: str, pos: int) -> int:
    """Index just past the string literal whose opening quote is at ``pos``."""
    quote = text[pos] * 3 if text.startswith(text[pos] * 3, pos) else text[pos]
    i = pos + len(quote)
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text.startswith(quote, i):
            return i + len(quote)
        if len(quote) == 1 and text[i] == "\n":
            break
        i += 1
    raise _error(text, "unterminated string", pos)


def _split(text: str, start: int, end: int) -> list:
    """Split ``text[start:end]`` at its top-level commas; returns ``(start, end)`` spans."""
    spans = []
    stack: list = []
    piece = i = start
    while i < end:
        ch = text[i]
        if ch in "'\"":
            i = _string_end(text, i)
            if i > end:
                raise _error(text, "unterminated string", i)
            continue
        if ch in _OPEN:
            stack.append((ch, i))
        elif ch in _CLOSE:
            if not stack or stack[-1][0] != _CLOSE[ch]:
                raise _error(text, f"unmatched {ch!r}", i)
            stack.pop()
        elif ch == "," and not stack:
            spans.append((piece, i))
            piece = i + 1
        i += 1
    if stack:
        ch, pos = stack[-1]
        raise _error(text, f"{ch!r} is never closed", pos)
    spans.append((piece, end))
    return spans


def _strip(text: str, start: int, end: int) -> tuple:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _literal(text: str, key: str, value: str, pos: int) -> Any:
    try:
        return ast.literal_eval(value)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        raise _error(text, f"option {key}={value} is not a Python literal (quote strings: {key}='...')",
                     pos) from None


def _element(text: str, start: int, end: int) -> PassSpec:
    start, end = _strip(text, start, end)
    if start == end:
        raise _error(text, "empty pipeline element", start)
    m = _NAME.match(text, start, end)
    if m is None:
        raise _error(text, f"expected a pass name, found {text[start]!r}", start)
    name = m.group()
    rest = m.end()
    while rest < end and text[rest].isspace():
        rest += 1
    if rest == end:
        return PassSpec(name)
    if text[rest] != "(" or text[end - 1] != ")":
        raise _error(text, f"unexpected {text[rest:end]!r} after {name!r}; options go in parentheses", rest)
    options: list = []
    inner = _split(text, rest + 1, end - 1)
    if len(inner) == 1 and not text[inner[0][0]:inner[0][1]].strip():  # NAME()
        return PassSpec(name)
    for a, b in inner:
        a, b = _strip(text, a, b)
        if a == b:
            raise _error(text, f"empty option in {name!r}", a)
        eq = text.find("=", a, b)
        key = text[a:eq].strip() if eq >= 0 else ""
        if eq < 0 or not _KEY.match(key):
            raise _error(text, f"options are written key=value, found {text[a:b]!r}", a)
        if any(k == key for k, _ in options):
            raise _error(text, f"option {key!r} given twice", a)
        options.append((key, _literal(text, key, text[eq + 1:b].strip(), eq + 1)))
    return PassSpec(name, tuple(options))


def parse_pipeline(text: str) -> PipelineSpec:
    """Parse a pipeline text.

    >>> str(parse_pipeline("FoldConstant, FuseOps( fuse_opt_level = 2 )"))
    'FoldConstant,FuseOps(fuse_opt_level=2)'

    :raises PipelineError: naming the column of the first problem
    """
    if not isinstance(text, str):
        raise PipelineError(f"a pipeline is a text like 'FoldConstant,FuseOps(fuse_opt_level=2)', got {text!r}")
    if not text.strip():
        raise PipelineError("the pipeline is empty; name at least one pass, e.g. -p FoldConstant")
    return PipelineSpec(tuple(_element(text, a, b) for a, b in _split(text, 0, len(text))))


def parse_element(text: str) -> PassSpec:
    """Parse one ``NAME`` or ``NAME(k=v, ...)`` (also used for ``--instrument``)."""
    spec = parse_pipeline(text)
    if len(spec.passes) != 1:
        raise PipelineError(f"expected one NAME(k=v) element, got {len(spec.passes)} in {text!r}")
    return spec.passes[0]


class Pipeline(transform.Sequential):
    """A :class:`~passhost.transform.Sequential` that remembers the text it was built from.

    :ivar spec: the :class:`PipelineSpec`; ``str(pipeline.spec)`` is the canonical text
    """

    __slots__ = ("spec",)

    def __init__(self, passes: list, spec: PipelineSpec, opt_level: int = 0, name: str = "sequential") -> None:
        super().__init__(passes, opt_level=opt_level, name=name)
        self.spec = spec


def pipeline(text: Union[str, PipelineSpec], *, registry: Any = None) -> Any:
    """Build a :class:`~passhost.transform.Sequential` from a pipeline text.

    The Sequential's ``spec`` attribute holds the parsed :class:`PipelineSpec`;
    ``str(seq.spec)`` is the canonical text.

    :raises PipelineError: for malformed text or options a pass rejects
    :raises PassNotFound: for a name no installed plugin provides
    """
    from .registry import get_registry

    spec = text if isinstance(text, PipelineSpec) else parse_pipeline(text)
    reg = registry if registry is not None else get_registry()
    passes = [reg.build_pass(p.name, **p.kwargs) for p in spec.passes]
    return Pipeline(passes, spec)


def _toposort(entries: Iterable[Any]) -> tuple:
    """``(ordered, cycle)``: a stable topological order of the entries (ties by name), or
    the names of one ordering cycle (closing name repeated) when there is one."""
    by_name = {e.name: e for e in entries}
    succ: dict = {n: set() for n in by_name}
    preds: dict = {n: set() for n in by_name}
    for e in by_name.values():
        for a in e.after:
            if a in by_name:
                succ[a].add(e.name)
                preds[e.name].add(a)
        for b in e.before:
            if b in by_name:
                succ[e.name].add(b)
                preds[b].add(e.name)
    indeg = {n: len(p) for n, p in preds.items()}
    ready = [n for n, d in indeg.items() if d == 0]
    heapq.heapify(ready)
    out = []
    while ready:
        n = heapq.heappop(ready)
        out.append(by_name[n])
        for s in succ[n]:
            indeg[s] -= 1
            if indeg[s] == 0:
                heapq.heappush(ready, s)
    if len(out) < len(by_name):
        return out, _cycle({n for n, d in indeg.items() if d > 0}, preds)
    return out, None


def order_passes(entries: Iterable[Any]) -> list:
    """Order records having ``name``, ``after`` and ``before`` (a stable topological sort).

    Ties are broken by name; names in ``after``/``before`` that are not among the
    entries are ignored.

    :raises PipelineError: naming the passes of a cycle
    """
    out, cycle = _toposort(entries)
    if cycle is not None:
        raise PipelineError(f"the default pipeline has an ordering cycle: {' -> '.join(cycle)}; "
                            "fix the after=/before= of these passes' PassEntry records")
    return out


def _cycle(left: set, preds: dict) -> list:
    """A cycle among ``left`` (every node there has a predecessor there)."""
    node = min(left)
    path: list = []
    seen: dict = {}
    while node not in seen:
        seen[node] = len(path)
        path.append(node)
        node = min(p for p in preds[node] if p in left)
    loop = path[seen[node]:]
    loop.reverse()
    start = loop.index(min(loop))
    loop = loop[start:] + loop[:start]
    return loop + [loop[0]]


def _left_out(record: Any, why: str) -> None:
    warnings.warn(f"pass {record.name!r} ({record.source.requirement}) is left out of the default pipeline: "
                  f"{why}", UserWarning, stacklevel=3)


def _ordered_defaults(records: list) -> list:
    """``records`` in pipeline order. An ordering cycle excludes its third-party members
    (those not shipped by the first-party distribution owning the name), each with a
    warning; a cycle of first-party passes alone is a :class:`PipelineError`."""
    from ._catalog import owns

    while True:
        ordered, cycle = _toposort(records)
        if cycle is None:
            return ordered
        members = set(cycle)
        guilty = [r for r in records if r.name in members and not owns("pass", r.name, r.source.distribution)]
        if not guilty:
            raise PipelineError(f"the default pipeline has an ordering cycle: {' -> '.join(cycle)}; "
                                "fix the after=/before= of these passes' PassEntry records")
        for r in guilty:
            _left_out(r, f"its after=/before= close an ordering cycle ({' -> '.join(cycle)})")
        records = [r for r in records if r not in guilty]


def default_pipeline(opt_level: int = 2, *, required: Sequence[str] = (), registry: Any = None) -> Any:
    """The pipeline of every installed pass whose entry says ``default=True``.

    Passes are ordered by their ``after``/``before`` declarations (ties by name); those
    with ``opt_level`` above ``opt_level`` are left out unless named in ``required``.
    The Sequential is named ``default_pipeline`` and carries ``spec`` like
    :func:`pipeline`.

    A third-party plugin cannot switch the default pipeline off for everyone: a member
    whose factory fails or returns something other than its pass, a name two plugins
    register with no first-party owner among them, and the third-party members of an
    ordering cycle are each left out with one warning naming the pass and its
    distribution, and the rest runs.

    :raises PipelineError: for a bad ``opt_level``, or an ordering cycle among
        first-party passes alone
    """
    from .registry import get_registry

    if isinstance(opt_level, bool) or not isinstance(opt_level, int):
        raise PipelineError(f"opt_level must be an integer, got {opt_level!r}")
    if isinstance(required, str) or not isinstance(required, (list, tuple, set, frozenset)):
        raise PipelineError(f"required must be a collection of pass names, got {required!r}")
    reg = registry if registry is not None else get_registry()
    for conflict in reg.unresolved_conflicts():
        if conflict.kind == "pass" and reg.conflict_is_default(conflict.name):
            warnings.warn(f"pass {conflict.name!r} is left out of the default pipeline: {conflict.message}",
                          UserWarning, stacklevel=2)
    records = [r for r in reg.pass_records() if r.entry.default]
    chosen = [r for r in _ordered_defaults(records) if r.opt_level <= opt_level or r.name in required]
    built = []
    for r in chosen:
        try:
            built.append((r, r.build()))
        except PipelineError as err:
            _left_out(r, str(err))
    spec = PipelineSpec(tuple(PassSpec(r.name) for r, _ in built))
    return Pipeline([p for _, p in built], spec, opt_level, "default_pipeline")
