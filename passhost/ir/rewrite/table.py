"""The rule table: rules indexed by what they can be rooted at, and the dispatch built from them.

A rule is a function that receives a node (rebuilt from its already-rewritten children)
and returns its replacement, or ``None`` to keep it. Each rule is added with its *roots*:
the operators whose calls it can replace (``Op`` objects or operator names) and the node
classes it can replace (``Let``, ``TupleGetItem``, ``Call`` for every call, ...); a rule
added without roots is offered every node. The table turns them, once, into what the walk
reads per node: one dictionary lookup by callee for a call, one by class for anything
else. A node no rule can be rooted at costs that lookup and nothing else::

    table = RuleTable()

    @table.on("tanh")
    def tanh_to_relu(call):
        return ir.nn.relu(call.args[0])

    walk(fn, table)      # tanh(%x) -> nn.relu(%x); every other node rebuilt only if a child changed

Several rules on one root are tried by priority, then in the order they were added; the
first that returns something other than ``None`` (or the node itself) wins. With ``with_original=True`` every
rule of the table is called ``rule(new, old)``: ``old`` is the original node (still typed
when the input was, with its original children), ``new`` the one rebuilt from the
rewritten children.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, Optional

from ...errors import IRError
from ..expr import NODE_CLASSES, Call, Op

__all__ = ["RuleTable"]


class RuleTable:
    """Rules by root, and the per-node dispatch built from them (see the module docs).

    :param rules: ``(roots, rule)`` pairs to add, in order (``roots`` as for :meth:`add`)
    :param with_original: call every rule as ``rule(new, old)`` instead of ``rule(new)``
    :param combine: how the rules of one root become the one function the walk calls:
        ``combine(rules)`` gets them in the order they are tried. The default calls them in
        turn until one returns a replacement; the pattern driver gives its own, which runs
        the matcher over the patterns of its rules in one loop (a rule is then whatever
        ``combine`` takes, not necessarily a function)
    """

    __slots__ = ("with_original", "combine", "_rules", "_dispatch")

    def __init__(self, rules: Iterable = (), *, with_original: bool = False,
                 combine: Optional[Callable[[list], Callable]] = None) -> None:
        self.with_original = with_original
        self.combine = combine
        self._rules: list = []     # (-priority, frozenset of roots or None for every node, rule), in order
        self._dispatch: Optional[tuple] = None
        for roots, fn in rules:
            self.add(roots, fn)

    def add(self, roots: Any, rule: Any, priority: int = 0) -> Any:
        """Add ``rule`` for ``roots``: an operator (``Op`` or its name), a node class, an
        list, tuple or set of those, or ``None`` for every node. Rules with a higher ``priority`` are
        tried first at every node; equal priorities keep the order of adding. Returns
        ``rule``."""
        if self.combine is None and not callable(rule):
            raise IRError(f"RuleTable.add: {rule!r} is not callable")
        self._rules.append((-priority, None if roots is None else _roots(roots), rule))
        self._dispatch = None
        return rule

    def on(self, *roots: Any) -> Callable[[Callable], Callable]:
        """Decorator form of :meth:`add`: ``@table.on("add", "multiply")``; ``@table.on()``
        offers the rule every node."""
        def register(rule: Callable) -> Callable:
            return self.add(roots if roots else None, rule)

        return register

    def __len__(self) -> int:
        return len(self._rules)

    @property
    def roots(self) -> Optional[frozenset]:
        """Every root some rule names (operators and classes), or ``None`` when a rule is
        offered every node."""
        out: set = set()
        for _, roots, _ in self._rules:
            if roots is None:
                return None
            out |= roots
        return frozenset(out)

    def dispatch(self) -> tuple:
        """``(by_op, for_calls, by_class)``, built once per set of rules: the rule for a
        call is ``by_op.get(call.op, for_calls)``, for any other node
        ``by_class.get(type(node))``; ``None`` means no rule is offered the node. Each entry
        is the one rule of its root, or those rules tried in order."""
        if self._dispatch is None:
            self._dispatch = self._build()
        return self._dispatch

    def _build(self) -> tuple:
        ordered = sorted(self._rules, key=lambda r: r[0])  # (stable: equal priorities keep their order)
        ops = {k for _, roots, _ in ordered if roots is not None for k in roots if type(k) is Op}
        pair = self.with_original
        combine = self.combine

        def rules_for(match: Callable[[Optional[frozenset]], bool]) -> Optional[Callable]:
            chosen = [fn for _, roots, fn in ordered if match(roots)]
            if not chosen:
                return None
            return _first(chosen, pair) if combine is None else combine(chosen)

        by_op = {op: rules_for(lambda r, op=op: r is None or op in r or Call in r) for op in ops}
        for_calls = rules_for(lambda r: r is None or Call in r)
        by_class = {}
        for cls in NODE_CLASSES:
            if cls is not Call:
                fn = rules_for(lambda r, cls=cls: r is None or cls in r)
                if fn is not None:
                    by_class[cls] = fn
        return by_op, for_calls, by_class

    def classes_only(self) -> Optional[frozenset]:
        """The node classes of a table whose every rule names classes only (no operator,
        no rule offered every node and none for every call), else ``None``: a walk over a
        graph holding none of them has nothing to offer."""
        roots = self.roots
        if roots is None or Call in roots or any(type(k) is Op for k in roots):
            return None
        return roots

    def __repr__(self) -> str:
        return f"<RuleTable of {len(self._rules)} rule(s)>"


def _roots(spec: Any) -> frozenset:
    items = list(spec) if isinstance(spec, (list, tuple, set, frozenset)) else [spec]
    out = set()
    for k in items:
        if isinstance(k, str):
            k = Op.get(k)
        if type(k) is not Op and k not in NODE_CLASSES:
            raise IRError(f"RuleTable: a root is an operator, its name or a node class, got {k!r}")
        out.add(k)
    return frozenset(out)


def _first(rules: list, pair: bool) -> Callable:
    """One rule as it is, several as one function trying them in order."""
    if len(rules) == 1:
        return rules[0]
    if pair:
        def first_of_pair(new: Any, old: Any) -> Any:
            for fn in rules:
                out = fn(new, old)
                if out is not None and out is not new:
                    return out
            return None

        return first_of_pair

    def first(new: Any) -> Any:
        for fn in rules:
            out = fn(new)
            if out is not None and out is not new:
                return out
        return None

    return first
