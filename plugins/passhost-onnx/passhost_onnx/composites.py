"""Composite patterns: the way back from passhost IR to single ONNX operators.

An import decomposes an ONNX operator passhost has no operator for into host operators
(``Softplus(x) -> add(log(add(exp(negative(abs(x))), 1f)), nn.relu(x))``). Beside that
converter, its family module declares the way back: a pattern of the decomposition and
the emitter writing the one ONNX node (TVM's BYOC composites)::

    @composite("onnx.Softplus", is_op("log")(is_op("add")(is_op("exp")(x), is_constant())))
    def _softplus(em, fn, args):
        return em.one("Softplus", args)

The export partitions ``@main`` with the composites of its opset
(:func:`partition_composites`, over ``passhost.ir.pattern.partition``)::

    multiply(%x, clip(add(multiply(%x, 0.166667f), 0.5f), a_min=0f, a_max=1f))
    ->  %0 = fn (%FunctionVar_0_0, Composite="onnx.HardSwish") { multiply(...) };  %0(%x)
    ->  HardSwish(x)

and writes each composite function through its emitter (:func:`emit_composite`). The
partition refuses a match one of whose inner values is read outside it, so a composite
never takes a value the graph still needs -- a graph output included: ``@main``'s result
is its body's root, which a match may end at but never take inside. An emitter that
declines (returns ``None``) has the function's body written call by call instead.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

from passhost import ir
from passhost.ir.pattern import (AltPattern, CallPattern, DFPattern, ExprPattern, TupleGetItemPattern, TuplePattern,
                                 partition_all, root_ops)
from passhost.ir.rewrite import like_originals

__all__ = ["Composite", "COMPOSITES", "composite", "partition_composites", "emitter_of", "scalar", "split", "calls", "example", "typed"]


@dataclass(frozen=True)
class Composite:
    """One way back to an ONNX operator.

    :param name: the ``Composite`` attribute of its functions (``"onnx.HardSwish"``)
    :param pattern: what it matches
    :param emit: ``emit(em, fn, args) -> value or None``: the ONNX node(s) for the
        function ``fn`` applied to the emitted ``args``; ``None`` declines
    :param since: the first opset with the operator
    :param stage: composites partition in stages, lowest first: one whose pattern holds
        another's comes before it (``HardSwish`` holds ``HardSigmoid``'s)
    :param check: ``check(root) -> bool``, more than the pattern says (``partition``'s check)
    :param examples: ``examples(rng) -> [ir.Function]``, graphs it should take that random
        instances of its pattern rarely are (``passhost check-rules`` tries them first)
    :param target: ``"onnxruntime"``: for an export to onnxruntime (its contrib operators; the
        emitter declines any other, and check-rules has no reference to check it against)
    """

    name: str
    pattern: DFPattern
    emit: Callable
    since: int = 1
    stage: int = 1
    check: Optional[Callable] = None
    examples: Optional[Callable] = None
    target: str = ""


#: every composite, in the order declared (the family modules fill it as they are imported)
COMPOSITES: list = []
_BY_NAME: dict = {}


def composite(name: str, pattern: DFPattern, *, since: int = 1, stage: int = 1,
              check: Optional[Callable] = None, examples: Optional[Callable] = None, target: str = "") -> Callable:
    """Register the decorated function as the emitter of composite ``name`` (see :class:`Composite`)."""

    def register(fn: Callable) -> Callable:
        c = Composite(name, pattern, fn, since, stage, check, examples, target)
        COMPOSITES.append(c)
        _BY_NAME[name] = c
        return fn

    return register


def partition_composites(expr: ir.Expr, opset: int) -> ir.Expr:
    """``expr`` (typed) with every match of a composite available at ``opset`` wrapped in a
    function (``Composite=name``), stage by stage, the composites of one stage in one walk
    (``partition_all``: at a node, the first declared that matches); each call of one is
    typed like the match it replaces (its body is typed when it is emitted). A composite
    whose pattern matches no call of ``expr`` as it came (checked over the calls of its root
    operators alone, once every operator of its clauses, :func:`_needed`, is called) is
    left out; a match inside a composite made in an earlier stage is not taken (its emitter
    reads its body as matched)."""
    calls = _calls_by_op(expr)
    stages: dict = {}
    for c in COMPOSITES:
        if c.since <= opset and all(k & calls.keys() for k in _needed(c.pattern)) and _some_match(c, calls):
            stages.setdefault(c.stage, []).append(c)
    inside: set = set()  # ids of the nodes of earlier stages' composite functions' bodies
    start = expr
    for stage in sorted(stages):
        if expr is not start:  # (the bodies the stages before made; a stage's patterns do not nest)
            inside, start = _composite_bodies(expr), expr
        expr = partition_all([(c.pattern, {"Composite": c.name}, _outside(inside, c.check)) for c in stages[stage]],
                             expr, typing=like_originals())
    return expr


def _calls_by_op(expr: ir.Expr) -> dict:
    """``{operator name: [its calls]}`` under ``expr``."""
    out: dict = {}
    for e in ir.post_order(expr):
        if type(e) is ir.Call and type(e.op) is ir.Op:
            out.setdefault(e.op.name, []).append(e)
    return out


def _some_match(c: Composite, calls: dict) -> bool:
    """Whether ``c``'s pattern matches a call of ``expr`` as it was (a partition that would
    find nothing costs a walk of the graph; a match may still be refused)."""
    ops = root_ops(c.pattern)
    roots = (e for name in (calls if ops is None else ops) for e in calls.get(name, ()))
    return any(c.pattern.match(e) for e in roots)


def _outside(inside: set, check: Optional[Callable]) -> Callable:
    return lambda root: id(root) not in inside and (check is None or check(root))


def _composite_bodies(expr: ir.Expr) -> set:
    """The ids of the nodes of the bodies of the composite functions under ``expr``."""
    found = [e for e in ir.post_order(expr) if type(e) is ir.Function and e.attrs.get("Composite")]
    return {id(n) for fn in found for n in ir.post_order(fn.body)}


def emitter_of(fn: ir.Function) -> Optional[Callable]:
    """The emitter of composite function ``fn`` (typed first), or ``None`` for another function."""
    name = fn.attrs.get("Composite") if fn.attrs else None
    c = _BY_NAME.get(name) if name else None
    if c is None:
        return None
    typed(fn)
    return c.emit


def typed(fn: ir.Function) -> ir.Function:
    """``fn`` with its body typed (a partition types the call of a composite, not its body)."""
    if not fn.body.has_type:
        ir.infer_type(fn)
    return fn


def _needed(p: DFPattern) -> list:
    """Sets of operators of which every match of ``p`` calls one or more (clauses): an
    alternative needs one of either side's."""
    t = type(p)
    if isinstance(p, CallPattern):
        ops = [{p.op.expr.name}] if isinstance(p.op, ExprPattern) and isinstance(p.op.expr, ir.Op) else []
        return ops + [k for a in p.args or () for k in _needed(a)]
    if t is AltPattern:
        return [a | b for a in _needed(p.left) for b in _needed(p.right)][:16]
    if t is TuplePattern:
        return [k for f in p.fields or () for k in _needed(f)]
    if t is TupleGetItemPattern:
        return _needed(p.tuple)
    inner = getattr(p, "pattern", None)  # (attributes and types narrow the inner pattern)
    return _needed(inner) if isinstance(inner, DFPattern) else []


def scalar(e: ir.Expr) -> Optional[float]:
    """The value of a one-element floating-point constant, else ``None``."""
    if type(e) is not ir.Constant or e.data.size != 1 or e.data.dtype.kind != "f":
        return None
    return float(e.data.reshape(()))


def split(call: ir.Expr) -> tuple:
    """``(other, value)`` for a two-argument call one of whose arguments is a scalar
    constant (either order), else ``(None, None)``."""
    if type(call) is ir.Call and len(call.args) == 2:
        for a, b in (call.args, call.args[::-1]):
            v = scalar(b)
            if v is not None:
                return a, v
    return None, None


def calls(e: ir.Expr, name: str) -> bool:
    """Whether ``e`` is a call of operator ``name``."""
    return type(e) is ir.Call and type(e.op) is ir.Op and e.op.name == name


def example(rng, build: Callable, shape: Optional[tuple] = None) -> ir.Function:
    """``fn (%x) { build(%x) }``, ``%x`` a float32 tensor of ``shape`` (default: random, rank 1 to 4)."""
    if shape is None:
        shape = tuple(int(d) for d in rng.randint(1, 5, size=rng.randint(1, 5)))
    x = ir.var("x", shape=shape)
    return ir.Function([x], build(x))
