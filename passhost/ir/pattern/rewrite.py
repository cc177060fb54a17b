"""Rules (:class:`DFPatternCallback`) and the driver that applies them, :func:`rewrite`: a
rule table of the rewrite engine (:mod:`passhost.ir.rewrite`) built from the callbacks'
pattern roots, swept to a fixed point."""
from __future__ import annotations

import inspect
import weakref
from typing import Any, Callable, Optional

from ...errors import IRError
from ..expr import Call, Expr, Function, TupleGetItem, set_span
from ..facts import CALLED_OPS
from ..op import Op
from ..rewrite import NO_TYPES, RuleTable, like_originals, walk
from ..rewrite.typing_policy import typed_for_matching
from ..visitor import post_order
from .match import _inputs, _Matcher, compile_simple, root_ops
from .needs import needed_ops
from .nodes import DFPattern, wildcard
from .prefilter import prefilter


class RewriteLimitError(IRError):
    """:func:`rewrite` reached its iteration cap; the message names the callbacks that kept firing."""


class DFPatternCallback:
    """A rule: ``pattern`` and ``callback(pre, post, node_map)`` returning the replacement.

    ``pre`` is the matched node of the input graph, ``post`` the same node rebuilt from
    already-rewritten arguments (the one that was matched), and ``node_map`` maps each
    pattern node to ``[expression it matched]``. Returning ``post`` (or None) keeps it.

    :param require_type: type the graph before matching (for ``has_dtype``/``has_shape``)
    :param rewrite_once: apply this callback in one sweep only, not to a fixed point
    :param priority: callbacks with a higher priority are tried first at every node;
        equal priorities keep the order they are given in
    :param name: how errors and reports name the rule (default: the class name)
    """

    pattern: Optional[DFPattern] = None

    def __init__(self, require_type: bool = False, rewrite_once: bool = False,
                 priority: int = 0, name: str = "") -> None:
        self.require_type = require_type
        self.rewrite_once = rewrite_once
        self.priority = priority
        self.name = name or type(self).__name__

    def callback(self, pre: Expr, post: Expr, node_map: dict) -> Optional[Expr]:
        raise NotImplementedError(f"{type(self).__name__}.callback")

    def __repr__(self) -> str:
        return f"<rule {self.name}>"


def rewrite(callbacks: Any, expr: Expr, mod: Any = None, max_iterations: int = 64,
            stats: Optional[dict] = None) -> Expr:
    """Rewrite ``expr`` with ``callbacks`` (one or a list) bottom-up until none fires.

    Each sweep is one walk of the rewrite engine (:func:`passhost.ir.rewrite.walk`) over a
    rule table built once from the callbacks' pattern roots: at every node it tries the
    callbacks whose pattern root can be that node (by priority, then in order); the first
    that returns a new expression replaces the node. Sweeps repeat until one changes
    nothing; after ``max_iterations`` sweeps that still changed something it raises
    :class:`RewriteLimitError` naming the callbacks that fired in the last sweep.

    :param mod: the module ``expr`` belongs to (a rule pass gives it): typing for the
        rules (``require_type``) and of what they build then knows the module's global
        functions, so ``@g0(%x)`` in ``expr`` or in a replacement is typed from ``@g0``
    :param stats: a dict to add ``{rule name: {"tried", "matched", "rewritten"}}`` counts
        to (a rule is *tried* at a node it could be rooted at)
    """
    rules = _sorted(callbacks)
    counts = None
    if stats is not None:  # (every rule gets its entry, swept or not)
        counts = {cb.name: stats.setdefault(cb.name, {"tried": 0, "matched": 0, "rewritten": 0}) for cb in rules}
    live, first_order = _live_on(rules, expr)
    if not live:
        return expr
    return _Sweeps(rules, counts).run(expr, mod, max_iterations, first_order)


def _sorted(callbacks: Any) -> list:
    """The callbacks by priority (stable), checked."""
    if isinstance(callbacks, DFPatternCallback):
        callbacks = [callbacks]
    rules = [cb for _, cb in sorted(enumerate(callbacks), key=lambda ic: (-ic[1].priority, ic[0]))]
    for cb in rules:
        if not isinstance(cb, DFPatternCallback) or not isinstance(cb.pattern, DFPattern):
            raise IRError(f"rewrite: {cb!r} is not a DFPatternCallback with a pattern")
    return rules


def _roots(cb: DFPatternCallback) -> Any:
    """What ``cb``'s pattern can be rooted at, as a rule table's roots: its root operators,
    ``TupleGetItem`` for a projection, ``None`` for any node."""
    ops = root_ops(cb.pattern)
    if ops is not None:
        return [Op.get(n) for n in ops]
    return TupleGetItem if _projected_ops(cb.pattern) is not None else None


def _live_on(rules: list, expr: Expr) -> tuple:
    """``(whether some rule may match in expr, the post order listed to find out or None)``.

    A function: each rule's clauses (needs.py) against the operators it calls (remembered
    per function, so the next pass over it asks no walk either). Another expression: one
    cheap walk for the operators every rooted match calls, unless a rule roots anywhere."""
    if type(expr) is Function:
        have = CALLED_OPS.get(expr)
        order = None
        if have is None:
            order = post_order(expr)
            have = CALLED_OPS[expr] = frozenset(n for n in order if type(n) is Op)
        return any(_live(cb, have) for cb in rules), order
    needed: Optional[set] = set()  # operators one of which every rooted match calls
    for cb in rules:
        ops = root_ops(cb.pattern)
        inner = _projected_ops(cb.pattern) if ops is None else ops
        if inner is None:
            return True, None  # rooted anywhere
        needed = None if inner is True or needed is None else needed | inner
    if needed is None:
        return True, None
    from ..analysis import calls_any

    return calls_any(expr, frozenset(Op.get(n) for n in needed)), None


class _Sweeps:
    """The sweeps of one :func:`rewrite` call: the rule table (one handler per root, trying
    its callbacks' patterns in order) and what a sweep learns for the next."""

    def __init__(self, rules: list, counts: Optional[dict]) -> None:
        self.rules = rules
        self.typed = any(cb.require_type for cb in rules)
        self.once = all(cb.rewrite_once for cb in rules)
        self.counts = counts  # {rule name: {"tried", "matched", "rewritten"}}, or None
        self.fired: dict = {}
        # After a sweep, another is needed only if a replacement brought in a node some rule
        # can be rooted at: every other node was offered the rules after its own inputs were
        # final, and a pattern only looks down from its root. ``known`` holds the nodes
        # already accounted for (built lazily at the first replacement of a sweep).
        self.order: Optional[list] = None
        self.known: Optional[set] = None
        self.more = False
        self.table = RuleTable(with_original=True, combine=self._handler)
        for cb in rules:
            self.table.add(_roots(cb), (cb, cb.name, prefilter(cb.pattern), compile_simple(cb.pattern)),
                           cb.priority)
        roots = self.table.roots
        self.anywhere = roots is None
        self.root_ops = frozenset() if roots is None else frozenset(k for k in roots if type(k) is Op)
        self.projections = roots is not None and TupleGetItem in roots

    def run(self, expr: Expr, mod: Any, max_iterations: int, first_order: Optional[list]) -> Expr:
        typing = like_originals(mod) if self.typed else NO_TYPES
        for _ in range(1 if self.once else max_iterations):
            listed = expr
            if self.typed:
                expr = typed_for_matching(expr, mod)
            self.fired.clear()
            order = first_order if first_order is not None and expr is listed else post_order(expr)
            first_order = None
            self.order, self.known, self.more = order, None, False
            new = walk(expr, self.table, typing, order=order)
            self.order = self.known = None
            if new is expr or not self.more:
                return new
            expr = new
        if self.once:
            return expr
        names = ", ".join(f"{n} ({k}x)" for n, k in sorted(self.fired.items()))
        raise RewriteLimitError(f"rewrite did not reach a fixed point in {max_iterations} sweeps; "
                                f"still firing: {names}. A rule whose output it matches again loops: "
                                "make its pattern exclude its own result, or set rewrite_once")

    def brings_roots(self, out: Expr) -> bool:
        """Whether ``out`` (a replacement) holds a node not seen in this sweep that some rule
        can be rooted at."""
        known = self.known
        if known is None:
            known = self.known = set(self.order)
        stack, found = [out], False
        ops, projections, anywhere = self.root_ops, self.projections, self.anywhere
        while stack:
            n = stack.pop()
            if n in known:
                continue
            known.add(n)
            if anywhere or (type(n) is Call and n.op in ops) or (projections and type(n) is TupleGetItem):
                found = True
            stack.extend(_inputs(n))
        return found

    def _handler(self, plans: list) -> Callable:
        """The function the walk calls at a node the callbacks of ``plans`` can be rooted
        at: their patterns tried in order, the first callback returning a replacement wins."""
        counts, once, fired = self.counts, self.once, self.fired

        def try_rules(post: Expr, pre: Expr) -> Optional[Expr]:
            if not once:
                known = self.known
                if known is not None and post is not pre:
                    known.add(post)  # rebuilt from replaced inputs in this sweep
            for cb, name, q, direct in plans:
                if counts is not None:
                    counts[name]["tried"] += 1
                if q is not None and not q(post):
                    continue
                if direct is not None:
                    bound = direct(post)
                    if bound is None:
                        continue
                else:
                    m = _Matcher()
                    if not m.match(cb.pattern, post):
                        continue
                    bound = m.memo
                if counts is not None:
                    counts[name]["matched"] += 1
                out = cb.callback(pre, post, {p: [e] for p, e in bound.items()})
                if out is not None and out is not post:
                    if type(out) is Call and out.span is None and post.span is not None:
                        set_span(out, post.span)  # the model's name of the node goes with its rewrite
                    if counts is not None:
                        counts[name]["rewritten"] += 1
                    if not once:  # (one sweep only: nothing to report or to sweep again for)
                        fired[name] = fired.get(name, 0) + 1
                        if self.brings_roots(out):
                            self.more = True
                    return out
            return None

        return try_rules


def _projected_ops(p: DFPattern) -> Any:
    """For a pattern rooted at a tuple projection: the operators the projected call may
    have (``True`` when any value may be projected); None for any other root."""
    from .nodes import TupleGetItemPattern, _Refine

    while isinstance(p, _Refine):
        p = p.pattern
    if type(p) is not TupleGetItemPattern:
        return None
    ops = root_ops(p.tuple)
    return True if ops is None else ops


def _live(cb: DFPatternCallback, called: frozenset) -> bool:
    """Whether a function calling the operators ``called`` may hold a match of ``cb``: each
    clause of its pattern names an operator the function calls."""
    clauses = _CLAUSES.get(cb.pattern)
    if clauses is None:
        clauses = _CLAUSES[cb.pattern] = tuple(frozenset(Op.get(n) for n in c) for c in needed_ops(cb.pattern))
    for c in clauses:
        if c.isdisjoint(called):
            return False
    return True


#: pattern -> its clauses as operator sets (weakly: a rule made afresh per run takes its
#: pattern with it)
_CLAUSES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


class _FunctionRule(DFPatternCallback):
    def __init__(self, pattern_fn: Callable, replacement: Callable, check: Optional[Callable],
                 name: str, priority: int, require_type: bool) -> None:
        super().__init__(require_type=require_type, priority=priority, name=name or pattern_fn.__name__)
        names = [p.name for p in inspect.signature(pattern_fn).parameters.values()
                 if p.default is inspect.Parameter.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        self.vars = {n: wildcard() for n in names}
        self.pattern = pattern_fn(**self.vars)
        if not isinstance(self.pattern, DFPattern):
            raise IRError(f"rule {self.name}: the pattern function returned {self.pattern!r}, not a pattern")
        self.replacement, self.check = replacement, check

    def callback(self, pre: Expr, post: Expr, node_map: dict) -> Optional[Expr]:
        bound = {n: node_map[w][0] for n, w in self.vars.items() if w in node_map}
        if self.check is not None and not self.check(**bound):
            return None
        return self.replacement(**bound)


def rule(pattern: Callable, replacement: Callable, check: Optional[Callable] = None, *,
         name: str = "", priority: int = 0, require_type: bool = True) -> DFPatternCallback:
    """A rule from functions, as onnxscript writes them: ``pattern(x, y, ...)`` gets one
    wildcard per parameter (parameters with a default are left to it) and returns a
    pattern over them; on a match,
    ``check(x=..., y=...)`` (optional) may refuse it, and ``replacement(x=..., y=...)``
    builds the new expression with the ordinary builders::

        def pattern(x, y):
            return is_op("add")(x, is_op("negative")(y))

        def replacement(x, y):
            return ir.subtract(x, y)

        rewrite([rule(pattern, replacement)], expr)
        # add(%a, negative(%b))   ->   subtract(%a, %b)

    Types are inferred before matching (``require_type``), so ``check`` can read
    ``x.checked_type``.
    """
    return _FunctionRule(pattern, replacement, check, name, priority, require_type)
