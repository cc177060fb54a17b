"""Purity: whether evaluating an expression may have a side effect (DeadCodeElimination's
step 1; see :mod:`.dead_code_elimination`)."""
from __future__ import annotations

from typing import Any

from passhost.ir import Call, Constant, Expr, Function, GlobalVar, Let, Op, Var, children

__all__ = ["Purity"]

#: nodes whose evaluation is trivially pure
_SIMPLE = frozenset({Var, Constant, Op, GlobalVar, Function})


class Purity:
    """Whether evaluating an expression may have a side effect (memoised, iterative).

    :param mod: the module whose global functions calls may reach (or ``None``)
    :param ignore_impurity: treat every expression as pure
    """

    def __init__(self, mod: Any = None, ignore_impurity: bool = False) -> None:
        self.mod = mod
        self.ignore_impurity = ignore_impurity
        self.memo: dict = {}
        #: ``{let-bound var: its value}``, filled as lets are met
        self.let_value: dict = {}
        self._globals = {gv.name_hint: f for gv, f in mod.items()} if mod is not None else {}

    def register_let(self, let: Let) -> None:
        self.let_value[let.var] = let.value

    def _callee_body(self, callee: Expr) -> Any:
        """What decides whether *calling* ``callee`` is pure: ``True``/``False``, or a
        function body whose purity decides it."""
        seen = 0
        while True:
            t = type(callee)
            if t is Op:
                return not callee.stateful
            if t is Function:
                return callee.body
            if t is GlobalVar:
                f = self._globals.get(callee.name_hint)
                if type(f) is not Function or f.attrs.get("Extern", 0):
                    return False
                return f.body
            if t is Var and seen < 64:
                value = self.let_value.get(callee)
                if value is None:
                    return False  # a parameter: a higher-order call, assumed impure
                callee = value
                seen += 1
                continue
            return False

    def is_pure(self, root: Expr) -> bool:
        """Whether evaluating ``root`` is free of side effects."""
        if self.ignore_impurity:
            return True
        memo = self.memo
        t = type(root)
        if t in _SIMPLE:
            return True
        r = memo.get(root)
        if r is not None:
            return r
        if t is Call and type(root.op) is Op:
            # fast path: an operator applied to leaves (the usual let value)
            for a in root.args:
                if type(a) not in _SIMPLE:
                    break
            else:
                return not root.op.stateful
        entered: set = set()
        stack: list = [root]
        while stack:
            node = stack[-1]
            if node in memo:
                stack.pop()
                continue
            t = type(node)
            if t in _SIMPLE:
                memo[node] = True
                stack.pop()
                continue
            if t is Call:
                body = self._callee_body(node.op)
                deps = (node.op,) + node.args
                if type(body) is not bool:
                    deps += (body,)
            elif t is Let:
                self.register_let(node)
                deps = (node.value, node.body)
            else:  # a tuple, a projection, an if: pure when its parts are
                deps = children(node)
            if node not in entered:
                entered.add(node)
                for d in deps:
                    if d not in memo and d not in entered:
                        stack.append(d)
                continue
            stack.pop()
            # a dependency still in progress is a recursive call: assumed pure
            ok = all(memo.get(d, True) for d in deps)
            if t is Call and type(body) is bool:
                ok = ok and body
            memo[node] = ok
        return memo[root]
