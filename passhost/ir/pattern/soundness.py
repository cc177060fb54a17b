"""Is a rule sound? Instantiate its pattern at random, rewrite, and compare the numbers.

For each trial, :func:`check_rule` builds a small graph that the rule's pattern matches:
wildcards become variables of one random shape (sometimes a scalar or a vector along the
last axis), constants take values rules tend to test for (0, 1, -1, 0.5, 2, sqrt(2),
1/sqrt(2), 1e-5) or random tensors, alternatives pick a branch, and operator attributes
are drawn from small domains (axes, permutations, ``keepdims``, dtypes) -- in most trials
the same draw for every call of one operator, as real graphs repeat them. A wildcard used
once may become a scalar constant; when the rule declines such a graph, the values of
those constants are searched among the special ones until it fires. Graphs that do not type-check,
or that the rule declines (its checks refuse them), are discarded. For the rest, the
interpreter evaluates the graph before and after the rewrite on random inputs; a
different type, a crash of the rule, or outputs that differ beyond ``rtol``/``atol`` is a
counterexample. Shapes are tried smallest first, so the first counterexample found is a
small one::

    before:  add(%x, 3f)          rule: add(x, constant) -> x   (forgot to check for 0)
    counterexample: %x: Tensor[(1), float32] = [0.5]  ->  3.5 before, 0.5 after

A rule whose pattern random instances cannot reach -- attributes that depend on the shapes,
such as a slice at half the last axis or reshapes between ``(batch * heads, seq, head)`` and
``(batch, heads, seq, head)`` -- may define ``examples(rng)``, returning graphs (functions of
random sizes) it should fire on; they are judged the same way after the random instances.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from ...errors import PasshostError
from ..expr import Call, Constant, Expr, Function, Tuple, TupleGetItem, Var
from ..op import Op
from ..types import LOW_PRECISION_DTYPES
from .match import _Matcher
from .nodes import (AltPattern, AttrPattern, CallPattern, ConstantPattern, DataTypePattern, DFPattern,
                    DominatorPattern, ExprPattern, ShapePattern, TuplePattern, TupleGetItemPattern, TypePattern,
                    VarPattern, WildcardPattern)
from .rewrite import DFPatternCallback

__all__ = ["Counterexample", "RuleReport", "check_rule", "check_rules"]

#: scalar values rules often look for
SPECIAL = (0.0, 1.0, -1.0, 0.5, 2.0, math.sqrt(2.0), 1 / math.sqrt(2.0), 1e-5, 3.0)
#: the shapes tried, smallest first
SHAPES = ((1,), (3,), (3, 3), (2, 3), (2, 3, 3), (1, 2, 3, 3))


@dataclass
class Counterexample:
    """A graph the rule rewrites wrongly, with the inputs that show it."""

    before: str
    after: str
    inputs: dict
    reason: str

    def __str__(self) -> str:
        shown = ", ".join(f"%{k} = {np.array2string(np.asarray(v), precision=4, threshold=12)}"
                          for k, v in self.inputs.items())
        return (f"{self.reason}\n  before: {self.before}\n  after:  {self.after}"
                + (f"\n  inputs: {shown}" if shown else ""))


@dataclass
class RuleReport:
    """What :func:`check_rule` found for one rule."""

    rule: str
    trials: int = 0
    fired: int = 0
    counterexample: Optional[Counterexample] = None
    seconds: float = 0.0

    @property
    def sound(self) -> Optional[bool]:
        """False with a counterexample, True if it fired and never changed the numbers,
        None if no trial made it fire (nothing was shown either way)."""
        if self.counterexample is not None:
            return False
        return True if self.fired else None


class _Builder:
    def __init__(self, rng: np.random.RandomState, shape: tuple, uses: dict, lone_constants: bool) -> None:
        self.rng = rng
        self.shape = shape
        self.memo: dict = {}
        self.attr_draws: dict = {}
        self.vars: list = []
        self.scalars: list = []   # the scalar constants made for wildcards: what the search varies
        self.uses = uses
        self.lone_constants = lone_constants
        self.same_attrs = rng.rand() < 0.7  # one draw per operator, as real graphs repeat attributes

    def leaf_var(self, name: str = "", dtype: str = "float32", shape: Optional[tuple] = None) -> Var:
        if shape is None:
            r = self.rng.rand()
            shape = self.shape if r < 0.8 or len(self.shape) == 0 else ((self.shape[-1],) if r < 0.9 else ())
        v = Var(name or f"v{len(self.vars)}", _tensor_type(shape, dtype))
        self.vars.append(v)
        return v

    def constant(self, dtype: str = "float32") -> Constant:
        r = self.rng.rand()
        if r < 0.55:
            value = np.asarray(SPECIAL[self.rng.randint(len(SPECIAL))])
        elif r < 0.7:
            value = self.rng.randn(self.shape[-1]) if self.shape else self.rng.randn()
        else:
            value = self.rng.randn(*self.shape)
        return Constant(np.asarray(value, dtype=dtype))

    def attrs(self, op: Op, fixed: dict) -> dict:
        drawn = self.attr_draws.get(op.name) if self.same_attrs else None
        if drawn is None:
            drawn = {k: _draw_attr(self.rng, k, v, len(self.shape)) for k, v in op.attr_defaults.items()}
            self.attr_draws[op.name] = drawn
        out = dict(drawn)
        out.update(fixed)
        return out

    def build(self, p: DFPattern, fixed_attrs: Optional[dict] = None, dtype: str = "float32",
              shape: Optional[tuple] = None) -> Expr:
        got = self.memo.get(p)
        if got is not None:
            return got
        out = self._build(p, fixed_attrs or {}, dtype, shape)
        self.memo[p] = out
        return out

    def _build(self, p: DFPattern, fixed: dict, dtype: str, shape: Optional[tuple]) -> Expr:  # noqa: C901
        t = type(p)
        if t is WildcardPattern:
            if self.lone_constants and self.uses.get(p, 0) <= 1 and shape is None:
                c = self.constant(dtype)
                if c.data.ndim == 0:
                    self.scalars.append(p)
                return c
            return self.leaf_var(dtype=dtype, shape=shape)
        if t is VarPattern:
            return self.leaf_var(p.name, dtype, shape)
        if t is ConstantPattern:
            return self.constant(dtype)
        if t is ExprPattern:
            return p.expr
        if t is AltPattern:
            return self.build(p.left if self.rng.rand() < 0.5 else p.right, fixed, dtype, shape)
        if t is AttrPattern:
            return self._build(p.pattern, {**fixed, **p.attrs}, dtype, shape)
        if t is DataTypePattern:
            return self._build(p.pattern, fixed, p.dtype, shape)
        if t is ShapePattern:
            return self._build(p.pattern, fixed, dtype, p.shape)
        if t is TypePattern:
            ty = p.type
            return self._build(p.pattern, fixed, getattr(ty, "dtype", dtype), tuple(getattr(ty, "shape", shape) or ()))
        if t is DominatorPattern:
            return self.build(p.child, fixed, dtype, shape)
        if t is TuplePattern:
            return Tuple([self.build(f) for f in (p.fields or ())])
        if t is TupleGetItemPattern:
            return TupleGetItem(self.build(p.tuple), max(p.index, 0))
        if t is CallPattern:
            op = _op_of(p.op, self.rng)
            if op is None:
                raise _Skip("a callee that is not an operator")
            n = op.definition.num_inputs
            if p.args is None:
                args = [self.leaf_var() for _ in range(max(n, 1))]
            else:
                args = [self.build(a) for a in p.args]
            return Call(op, args, self.attrs(op, fixed))
        raise _Skip(f"pattern node {type(p).__name__}")


class _Skip(Exception):
    pass


def _uses(pattern: DFPattern) -> dict:
    """How many parents each node of the pattern DAG has (a wildcard used twice stands for
    one value the rule compares with itself, so it stays a variable)."""
    counts: dict = {}
    seen: set = set()
    stack = [pattern]
    while stack:
        p = stack.pop()
        kids = _kids(p)
        for k in kids:
            counts[k] = counts.get(k, 0) + 1
        if id(p) not in seen:
            seen.add(id(p))
            stack.extend(kids)
    return counts


def _kids(p: DFPattern) -> list:
    t = type(p)
    if t is CallPattern:
        return list(p.args or ())
    if t is AltPattern:
        return [p.left, p.right]
    if t in (AttrPattern, DataTypePattern, ShapePattern, TypePattern):
        return [p.pattern]
    if t is TuplePattern:
        return list(p.fields or ())
    if t is TupleGetItemPattern:
        return [p.tuple]
    if t is DominatorPattern:
        return [p.child]
    return []


def _op_of(p: DFPattern, rng: np.random.RandomState) -> Optional[Op]:
    if type(p) is ExprPattern and isinstance(p.expr, Op):
        return p.expr
    if type(p) is AltPattern:
        return _op_of(p.left if rng.rand() < 0.5 else p.right, rng)
    return None


def _tensor_type(shape: tuple, dtype: str):
    from ..types import TensorType

    return TensorType(tuple(shape), dtype)


def _draw_attr(rng: np.random.RandomState, key: str, default: Any, ndim: int) -> Any:
    if isinstance(default, bool):
        return bool(rng.rand() < 0.5)
    if key == "axis":
        axes = [-1, 0, 1][: max(1, min(3, ndim))]
        if default is None or isinstance(default, tuple):
            choices: list = [None] + [(a,) for a in axes]
            return choices[rng.randint(len(choices))]
        return axes[rng.randint(len(axes))]
    if key == "axes" and default is None:
        return None if rng.rand() < 0.3 else tuple(int(a) for a in rng.permutation(ndim))
    if key == "dtype" and (default is None or isinstance(default, str) and default):
        return ("float32", "float16", "int32", default or "float32")[rng.randint(4)]
    if key == "approximate":
        return ("none", "tanh")[rng.randint(2)]
    if key in ("a_min", "a_max") and default is None:
        return float(rng.choice([-1.0, 0.0, 1.0])) if key == "a_min" else float(rng.choice([1.0, 2.0, 6.0]))
    return default


def _inputs(rng: np.random.RandomState, params: list, positive: bool) -> list:
    out = []
    for v in params:
        ty = v.type_annotation
        if ty.dtype.startswith("float"):
            a = rng.randn(*ty.shape) * 2
            out.append(np.asarray(np.abs(a) + 0.1 if positive else a, dtype=ty.dtype))
        elif ty.dtype == "bool":
            out.append(rng.rand(*ty.shape) < 0.5)
        else:
            out.append(np.asarray(rng.randint(-5, 6, size=ty.shape), dtype=ty.dtype))
    return out


def _close(before: Any, after: Any, rtol: float, atol: float) -> Optional[str]:
    if isinstance(before, tuple) != isinstance(after, tuple):
        return "the result changes from a tuple to a tensor or back"
    if isinstance(before, tuple):
        if len(before) != len(after):
            return "the result tuple changes length"
        for b, a in zip(before, after):
            why = _close(b, a, rtol, atol)
            if why:
                return why
        return None
    b, a = np.asarray(before), np.asarray(after)
    if b.shape != a.shape or b.dtype != a.dtype:
        return f"the result changes from {b.dtype}{list(b.shape)} to {a.dtype}{list(a.shape)}"
    if b.dtype.name in LOW_PRECISION_DTYPES and b.dtype.name.startswith(("bfloat", "float")):  # (ml_dtypes' kind is 'V': compare the values as floats)
        b, a = b.astype("float32"), a.astype("float32")
    if b.dtype.kind in "fc":
        finite = np.isfinite(b)
        if not np.array_equal(finite, np.isfinite(a)) and finite.all():
            return "the rewrite gives NaN or infinity where the original is finite"
        if not np.allclose(a[finite], b[finite], rtol=rtol, atol=atol):
            worst = float(np.max(np.abs(a[finite].astype("float64") - b[finite])))
            return f"the numbers change (max abs difference {worst:.3g})"
        return None
    if not np.array_equal(a, b):
        return "the values change"
    return None


def check_rule(rule: DFPatternCallback, *, min_fired: int = 25, max_trials: int = 3000, max_seconds: float = 6.0,
               seed: int = 0, rtol: float = 1e-4, atol: float = 1e-5) -> RuleReport:
    """Try ``rule`` on random instances of its pattern until it has fired ``min_fired``
    times (or ``max_trials``/``max_seconds`` run out); the first counterexample ends it."""
    from ..type_infer import infer_type

    report = RuleReport(rule.name)
    rng = np.random.RandomState(seed)
    uses = _uses(rule.pattern)
    start = time.perf_counter()
    examples = getattr(rule, "examples", None)
    if callable(examples):  # first, with half the time: they are what the rule was written for
        _check_examples(rule, examples, report, rng, rtol, atol, min_fired, max_trials, start + max_seconds / 2)
        if report.counterexample is not None:
            report.seconds = time.perf_counter() - start
            return report
    per_shape = max(1, max_trials // len(SHAPES))
    for shape in SHAPES:
        for _ in range(per_shape):
            if report.fired >= min_fired * (SHAPES.index(shape) + 1) / len(SHAPES) and shape != SHAPES[-1]:
                break
            if time.perf_counter() - start > max_seconds:
                break
            report.trials += 1
            b = _Builder(rng, shape, uses, lone_constants=rng.rand() < 0.5)
            try:
                body = b.build(rule.pattern)
                fn = infer_type(Function(list(b.vars), body))
            except (_Skip, PasshostError, ValueError, TypeError, IndexError):
                continue
            if not _Matcher().match(rule.pattern, fn.body):
                continue
            try:
                fn, new = _fire(rule, fn, b, rng)
            except _Crash as crash:
                report.counterexample = Counterexample(str(fn.body).strip(), "-", {}, str(crash))
                break
            if new is None:
                continue
            if _judge(report, fn, new, rng, rtol, atol):
                break
        if report.counterexample is not None or time.perf_counter() - start > max_seconds:
            break
    report.seconds = time.perf_counter() - start
    return report


def _judge(report: RuleReport, fn: Function, new: Function, rng: np.random.RandomState, rtol: float,
           atol: float) -> bool:
    """Count a firing of the rule on ``fn`` (rewritten to ``new``) and compare the two on random
    inputs; True when that gave a counterexample (recorded in ``report``)."""
    from ..interpreter import evaluate
    from ..module import IRModule
    from ..type_infer import infer_type

    before_text = str(fn.body).strip()
    report.fired += 1
    after_text = str(new.body).strip()
    try:
        new = infer_type(Function(list(new.params), new.body))
    except PasshostError as err:
        report.counterexample = Counterexample(before_text, after_text, {}, f"the rewrite does not type-check: {err}")
        return True
    if new.body.checked_type != fn.body.checked_type:
        report.counterexample = Counterexample(before_text, after_text, {},
                                               f"the type changes from {fn.body.checked_type} to {new.body.checked_type}")
        return True
    for positive in (False, True):
        feeds = _inputs(rng, fn.params, positive)
        try:
            with np.errstate(all="ignore"):
                want = evaluate(IRModule.from_expr(fn), *feeds)
                got = evaluate(IRModule.from_expr(new), *feeds)
        except PasshostError:
            continue
        why = _close(want, got, rtol, atol)
        if why:
            report.counterexample = Counterexample(
                before_text, after_text, {p.name_hint: f for p, f in zip(fn.params, feeds)}, why)
            return True
    return False


def _check_examples(rule: DFPatternCallback, examples: Any, report: RuleReport, rng: np.random.RandomState,
                    rtol: float, atol: float, min_fired: int, max_trials: int, deadline: float) -> None:
    """The graphs ``rule.examples(rng)`` gives, judged as the random instances are: for a rule
    whose pattern random instances cannot reach (a slice at half the last axis, reshapes between
    ``(batch * heads, seq, head)`` and ``(batch, heads, seq, head)``), a generator of graphs of
    random sizes it should fire on. Each graph is a trial; one the rule declines is not a finding."""
    from ..type_infer import infer_type
    from .rewrite import rewrite

    goal = report.fired + min_fired
    trials = 0
    while report.fired < goal and trials < max_trials and time.perf_counter() < deadline:
        batch = list(examples(rng))
        if not batch:
            return
        for fn in batch:
            trials += 1
            report.trials += 1
            try:
                fn = infer_type(fn)
            except PasshostError as err:
                report.counterexample = Counterexample(str(fn.body).strip(), "-", {},
                                                       f"the rule's own example does not type-check: {err}")
                return
            try:
                new = rewrite([rule], fn, max_iterations=8)
            except Exception as err:  # noqa: BLE001 - a rule that crashes is a finding
                report.counterexample = Counterexample(str(fn.body).strip(), "-", {},
                                                       f"the rule raised {type(err).__name__}: {err}")
                return
            if new is not fn and _judge(report, fn, new, rng, rtol, atol):
                return


class _Crash(Exception):
    pass


def _fire(rule: DFPatternCallback, fn: Function, b: "_Builder", rng: np.random.RandomState) -> tuple:
    """Rewrite ``fn`` with ``rule``; if the rule declines and the graph has scalar constants
    standing for wildcards, search their values among :data:`SPECIAL` (all combinations for
    up to three of them, else a random sample) for one the rule accepts. Returns
    ``(graph, rewritten)``, ``rewritten`` None if it never fired."""
    from ..type_infer import infer_type
    from ..rewrite import rewrite_post_order
    from .rewrite import rewrite

    def attempt(f: Function):
        try:
            out = rewrite([rule], f, max_iterations=8)
        except Exception as err:  # noqa: BLE001 - a rule that crashes is a finding
            raise _Crash(f"the rule raised {type(err).__name__}: {err}") from None
        return None if out is f else out

    new = attempt(fn)
    if new is not None or not b.scalars:
        return fn, new
    leaves = [b.memo[p] for p in b.scalars]
    n = len(leaves)
    combos = ([np.unravel_index(i, (len(SPECIAL),) * n) for i in range(len(SPECIAL) ** n)] if n <= 3
              else [tuple(rng.randint(len(SPECIAL), size=n)) for _ in range(300)])
    for combo in combos:
        memo = {leaf: Constant(np.asarray(SPECIAL[i], dtype=leaf.data.dtype)) for leaf, i in zip(leaves, combo)}
        body = rewrite_post_order(fn.body, None, memo=dict(memo))
        try:
            g = infer_type(Function(list(fn.params), body))
        except PasshostError:
            continue
        new = attempt(g)
        if new is not None:
            return g, new
    return fn, None


def check_rules(rules: list, **kw: Any) -> list:
    """:func:`check_rule` for each rule; a list of :class:`RuleReport`."""
    return [check_rule(r, **kw) for r in rules]
