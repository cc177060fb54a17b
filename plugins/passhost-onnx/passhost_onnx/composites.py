"""Composite patterns: the way back from passhost IR to single ONNX operators.

An import decomposes an ONNX operator passhost has no operator for into host operators
(``Softplus(x) -> add(log(add(exp(negative(abs(x))), 1f)), nn.relu(x))``). Beside that
converter, its family module declares the way back: a pattern of the decomposition and
the emitter writing the one ONNX node (TVM's BYOC composites)::

    @composite("onnx.Softplus", is_op("log")(is_op("add")(is_op("exp")(x), is_constant())))
    def _softplus(em, m, args):
        return em.one("Softplus", args)

The export finds the matches in ``@main`` (:func:`composite_parts`, over
``passhost.ir.pattern.find_parts``, the partition's decision without its rebuild) and
writes each through its emitter, which reads the match (``m.root``, ``m.leaves``) and gets
the emitted values of its leaves::

    multiply(%x, clip(add(multiply(%x, 0.166667f), 0.5f), a_min=0f, a_max=1f))
    ->  Part(onnx.HardSwish, root=multiply(...), leaves=[%x])
    ->  HardSwish(x)

A match one of whose inner values is read outside it is refused, so a composite never
takes a value the graph still needs -- a graph output included: ``@main``'s result is its
body's root, which a match may end at but never take inside. An emitter that declines
(returns ``None``) has the match written call by call instead.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

from passhost import ir
from passhost.ir.pattern import DFPattern, find_parts

__all__ = ["Composite", "COMPOSITES", "composite", "composite_parts", "split", "calls", "example"]


@dataclass(frozen=True)
class Composite:
    """One way back to an ONNX operator.

    :param name: its name (``"onnx.HardSwish"``)
    :param pattern: what it matches
    :param emit: ``emit(em, m, args) -> value or None``: the ONNX node(s) for the match
        ``m`` (a :class:`~passhost.ir.pattern.Part`: ``m.root``, ``m.leaves``) on the
        emitted values ``args`` of its leaves; ``None`` declines
    :param since: the first opset with the operator
    :param stage: composites are matched in stages, lowest first: one whose pattern holds
        another's comes before it (``HardSwish`` holds ``HardSigmoid``'s)
    :param check: ``check(root)``, more than the pattern says: a true value takes the match,
        and the emitter reads it as ``m.info`` (what the check worked out, not worked out twice)

    :param examples: ``examples(rng) -> [ir.Function]``, graphs it should take that random
        instances of its pattern rarely are (``passhost check-rules`` tries them first)
    :param target: ``"onnxruntime"``: only for an export to onnxruntime (its contrib
        operators; check-rules has no reference to check it against)
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


def composite(name: str, pattern: DFPattern, **options: Any) -> Callable:
    """Register the decorated function as the emitter of composite ``name``; ``options``
    are :class:`Composite`'s (``since``, ``stage``, ``check``, ``examples``, ``target``)."""

    def register(fn: Callable) -> Callable:
        COMPOSITES.append(Composite(name, pattern, fn, **options))
        return fn

    return register


def composite_parts(expr: ir.Expr, opset: int, target: str = "", only: Optional[list] = None) -> dict:
    """``{id(root): Part(composite, root, leaves)}``: the matches in ``expr`` (typed) of the
    composites (``only``, default all) available at ``opset`` and ``target``, stage by stage,
    the first declared winning at a node; a later stage never takes a node an earlier took."""
    stages: dict = {}
    for c in COMPOSITES if only is None else only:
        if c.since <= opset and (not c.target or c.target == target):
            stages.setdefault(c.stage, []).append((c.pattern, c, c.check))
    return find_parts([stages[s] for s in sorted(stages)], expr) if stages else {}


def split(call: ir.Expr) -> tuple:
    """``(other, value)`` for a two-argument call one of whose arguments is a one-element
    floating-point constant (either order), else ``(None, None)``."""
    if type(call) is ir.Call and len(call.args) == 2:
        for a, b in (call.args, call.args[::-1]):
            if type(b) is ir.Constant and b.data.size == 1 and b.data.dtype.kind == "f":
                return a, float(b.data.reshape(()))
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
