"""Seeded random programs for property tests of passes.

:func:`random_graph` builds a well-typed ``main`` from elementwise and broadcast
arithmetic, ``nn.conv2d``, pooling, ``nn.dense``, ``nn.bias_add``, ``nn.batch_norm``
with ``TupleGetItem``, scalar and tensor constants and shared sub-expressions (plus,
on request, structurally duplicated calls, let bindings and tuples). Values stay
bounded (every intermediate is at most about 1e4 in magnitude: large ones are clamped
with ``minimum``/``maximum``), so evaluating a program never overflows float32 and
:func:`random_inputs` gives inputs in ``[-1, 1)``. The same seed always builds the
same program, node for node.
"""
from __future__ import annotations

import random
from typing import Optional, Sequence

import numpy as np

from .. import ir
from ..errors import IRError
from ..numerics import random_inputs

__all__ = ["random_graph", "random_inputs", "KINDS"]

#: the kinds of steps :func:`random_graph` draws from, with their default weights
KINDS = {
    "binary": 6,      # add / subtract / multiply / maximum / minimum with a value or constant
    "divide": 1,      # divide by a constant of magnitude >= 0.5
    "unary": 3,       # negative / nn.relu
    "exp": 1,         # exp of a small value
    "conv2d": 2,
    "pool": 1,        # nn.max_pool2d / nn.avg_pool2d
    "global_pool": 1,  # nn.global_avg_pool2d
    "batch_norm": 2,  # nn.batch_norm(...)[0]
    "bias_add": 1,
    "dense": 1,       # nn.batch_flatten + nn.dense (+ sometimes nn.bias_add)
    "duplicate": 1,   # a second, structurally identical copy of an earlier call
    "tuple": 1,       # a tuple of values and a TupleGetItem of it (only with tuples=True)
    "if": 1,          # if (sum(v) < 0) { f(v) } else { g(v) } (only with ifs=True)
    "rank5": 1,       # a 4-D value made 5-D by expand_dims, used as a 5-D value (only with rank5=True)
    "closure": 3,     # fn (%y) { steps over %y and captured outer values }, called in place, let-bound
                      # or shared by two calls (only with closures=True)
    "global": 2,      # a call of a global function @gK (some Inline=1) built over its own
                      # parameters, or of an earlier one (only with functions=True)
    "dead_let": 1,    # let %dK = <value>; that nothing uses (only with dead_lets=True)
    "scoped_if": 2,   # if (sum(v) < 0) { steps } else { steps }: branches are nested scopes over
                      # outer values (only with scopes=True)
}
#: kinds drawn only when their keyword asks for them (so older seeds give the same programs)
_OPT_IN = {"tuple": "tuples", "if": "ifs", "rank5": "rank5", "closure": "closures", "global": "functions",
           "dead_let": "dead_lets", "scoped_if": "scopes"}
#: how deep closures, global functions and scoped ifs nest in one another
_MAX_DEPTH = 2

_CLAMP_ABOVE = 50.0
_CLAMP_TO = 10.0


class _Value:
    __slots__ = ("expr", "shape", "bound", "uses")

    def __init__(self, expr: ir.Expr, shape: tuple, bound: float) -> None:
        self.expr = expr
        self.shape = shape
        self.bound = bound
        self.uses = 0


def _broadcast(a: tuple, b: tuple) -> Optional[tuple]:
    if all(type(d) is int for d in a + b):
        try:
            return tuple(np.broadcast_shapes(a, b))
        except ValueError:
            return None
    # symbolic: broadcast only where it holds for every binding (equal, or one side 1)
    n = max(len(a), len(b))
    a, b = (1,) * (n - len(a)) + tuple(a), (1,) * (n - len(b)) + tuple(b)
    out = []
    for x, y in zip(a, b):
        if x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        else:
            return None
    return tuple(out)


def _static(shape: tuple) -> bool:
    return all(type(d) is int for d in shape)


def _at_least(d, k: int) -> bool:
    """``d >= k``; a size variable of a symbolic graph is at least :data:`MIN_SIZE`."""
    return d >= k if type(d) is int else k <= MIN_SIZE


#: the smallest value a size variable of a symbolic graph (``n``, ``h``, ``w``) is bound to
#: for the graph to be valid (its pools and convolutions assume it)
MIN_SIZE = 4


class _Builder:
    def __init__(self, seed: int, dtype: str, lets: bool, tuples: bool) -> None:
        self.rnd = random.Random(seed)
        self.np = np.random.RandomState(seed % (2 ** 32))
        self.dtype = dtype
        self.lets = lets
        self.tuples = tuples
        self.pool: list = []
        self.bindings: list = []
        self.calls: list = []
        self.tuple_values: list = []
        self.functions: list = []   # (GlobalVar, Function, param shapes, param bounds, result value)
        self.depth = 0              # nesting of the scope being built (closures, globals, ifs)
        self.serial = 0             # numbers the variables of nested scopes
        self.kinds: tuple = ((), ())  # (names, weights) the steps draw from

    # -- helpers -----------------------------------------------------------------
    def const(self, shape: tuple, low: float = -1.0, high: float = 1.0) -> ir.Expr:
        if shape == ():
            value = round(self.rnd.uniform(low, high), 3)
            return ir.const(value, self.dtype)
        return ir.const(self.np.uniform(low, high, size=shape).astype(self.dtype))

    def pick(self, pred=None) -> Optional[_Value]:
        cands = [v for v in self.pool if pred is None or pred(v)]
        if not cands:
            return None
        unused = [v for v in cands if v.uses == 0]
        if unused and self.rnd.random() < 0.7:
            return self.rnd.choice(unused)
        return self.rnd.choice(cands)

    def add(self, expr: ir.Expr, shape: tuple, bound: float, *used: _Value) -> _Value:
        for u in used:
            u.uses += 1
        if bound > _CLAMP_ABOVE:
            expr = ir.minimum(ir.maximum(expr, ir.const(-_CLAMP_TO, self.dtype)),
                              ir.const(_CLAMP_TO, self.dtype))
            bound = _CLAMP_TO
        if type(expr) is ir.Call:
            self.calls.append((expr, shape, bound))
        if self.lets and self.rnd.random() < 0.3:
            var = ir.var(f"v{len(self.bindings)}", ir.TensorType(shape, self.dtype))
            self.bindings.append((var, expr))
            expr = var
        value = _Value(expr, shape, bound)
        self.pool.append(value)
        return value

    # -- steps ---------------------------------------------------------------------
    def step(self, kind: str) -> bool:
        return getattr(self, "_" + kind)()

    def _binary(self) -> bool:
        a = self.pick()
        if a is None:
            return False
        name = self.rnd.choice(["add", "subtract", "multiply", "maximum", "minimum"])
        r = self.rnd.random()
        other = None
        if r < 0.5:
            def fits(v: _Value) -> bool:
                out = _broadcast(a.shape, v.shape)
                return out is not None and out in (a.shape, v.shape)
            other = self.pick(fits)
        if other is not None:
            rhs, rshape, rbound = other.expr, other.shape, other.bound
        else:
            rshape = self._const_shape(a.shape)
            rhs, rbound = self.const(rshape), 1.0
        lhs = a.expr
        if self.rnd.random() < 0.3:
            lhs, rhs = rhs, lhs
        out = _broadcast(a.shape, rshape)
        if name in ("add", "subtract"):
            bound = a.bound + rbound
        elif name == "multiply":
            bound = a.bound * rbound
        else:
            bound = max(a.bound, rbound)
        used = (a,) if other is None else (a, other)
        self.add(getattr(ir, name)(lhs, rhs), out, bound, *used)
        return True

    def _const_shape(self, shape: tuple) -> tuple:
        choices = [(), shape]
        if len(shape) == 4:
            c = shape[1]
            choices += [(c, 1, 1), (1, c, 1, 1), (shape[3],)]
        elif len(shape) >= 1:
            choices += [(shape[-1],)]
        return self.rnd.choice([s for s in choices if _static(s)])  # (a weight has a static shape)

    def _divide(self) -> bool:
        a = self.pick()
        if a is None:
            return False
        mag = self.rnd.uniform(0.5, 2.0) * self.rnd.choice([-1.0, 1.0])
        c = ir.const(round(mag, 3), self.dtype)
        self.add(ir.divide(a.expr, c), a.shape, a.bound * 2.0, a)
        return True

    def _unary(self) -> bool:
        a = self.pick()
        if a is None:
            return False
        if self.rnd.random() < 0.5:
            self.add(ir.negative(a.expr), a.shape, a.bound, a)
        else:
            self.add(ir.nn.relu(a.expr), a.shape, a.bound, a)
        return True

    def _exp(self) -> bool:
        a = self.pick(lambda v: v.bound <= 4.0)
        if a is None:
            return False
        self.add(ir.exp(a.expr), a.shape, float(np.exp(a.bound)), a)
        return True

    def _conv2d(self) -> bool:
        a = self.pick(lambda v: len(v.shape) == 4)
        if a is None:
            return False
        n, c, h, w = a.shape
        k = self.rnd.choice([1, 3]) if _at_least(h, 3) and _at_least(w, 3) else 1
        o = self.rnd.choice([2, 3, 4])
        weight = self.const((o, c, k, k), -0.5, 0.5)
        out = ir.nn.conv2d(a.expr, weight, padding=(k // 2, k // 2), channels=o, kernel_size=(k, k))
        self.add(out, (n, o, h, w), a.bound * 0.5 * c * k * k, a)
        return True

    def _pool(self) -> bool:
        a = self.pick(lambda v: len(v.shape) == 4 and _at_least(v.shape[2], 2) and _at_least(v.shape[3], 2))
        if a is None:
            return False
        n, c, h, w = a.shape
        fn = self.rnd.choice([ir.nn.max_pool2d, ir.nn.avg_pool2d])
        if _static((h, w)) and h % 2 == 0 and w % 2 == 0 and self.rnd.random() < 0.4:
            out = fn(a.expr, pool_size=(2, 2), strides=(2, 2))
            shape = (n, c, h // 2, w // 2)
        else:
            out = fn(a.expr, pool_size=(3, 3), strides=(1, 1), padding=(1, 1))
            shape = a.shape
        self.add(out, shape, a.bound, a)
        return True

    def _global_pool(self) -> bool:
        a = self.pick(lambda v: len(v.shape) == 4 and v.shape[2:] != (1, 1))
        if a is None:
            return False
        n, c = a.shape[:2]
        self.add(ir.nn.global_avg_pool2d(a.expr), (n, c, 1, 1), a.bound, a)
        return True

    def _batch_norm(self) -> bool:
        a = self.pick(lambda v: len(v.shape) == 4)
        if a is None:
            return False
        c = a.shape[1]
        gamma = self.const((c,), 0.5, 1.5)
        beta = self.const((c,), -0.5, 0.5)
        mean = self.const((c,), -0.5, 0.5)
        var = self.const((c,), 0.5, 1.5)
        bn = ir.nn.batch_norm(a.expr, gamma, beta, mean, var)
        self.add(bn[0], a.shape, 2.2 * (a.bound + 0.5) + 0.5, a)
        return True

    def _bias_add(self) -> bool:
        a = self.pick(lambda v: len(v.shape) in (2, 4) and type(v.shape[1]) is int)
        if a is None:
            return False
        bias = self.const((a.shape[1],))
        self.add(ir.nn.bias_add(a.expr, bias), a.shape, a.bound + 1.0, a)
        return True

    def _dense(self) -> bool:
        a = self.pick(lambda v: len(v.shape) in (2, 4) and _static(v.shape[1:]))
        if a is None:
            return False
        x, shape, bound = a.expr, a.shape, a.bound
        if len(shape) == 4:
            x = ir.nn.batch_flatten(x)
            shape = (shape[0], int(np.prod(shape[1:])))
        units = self.rnd.choice([2, 3, 5, 8])
        weight = self.const((units, shape[1]), -0.5, 0.5)
        out = ir.nn.dense(x, weight, units=units)
        bound = bound * 0.5 * shape[1]
        if self.rnd.random() < 0.5:
            out = ir.nn.bias_add(out, self.const((units,)), axis=-1)
            bound += 1.0
        self.add(out, (shape[0], units), bound, a)
        return True

    def _duplicate(self) -> bool:
        if not self.calls:
            return False
        call, shape, bound = self.rnd.choice(self.calls)
        self.add(ir.Call(call.op, call.args, call.attrs), shape, bound)
        return True

    def _tuple(self) -> bool:
        if not self.tuples or not self.pool:
            return False
        k = self.rnd.randint(2, 3)
        values = [self.pick() for _ in range(k)]
        tup = ir.Tuple([v.expr for v in values])
        i = self.rnd.randrange(k)
        for v in values:
            v.uses += 1
        self.tuple_values.append(tup)
        self.add(ir.TupleGetItem(tup, i), values[i].shape, values[i].bound)
        return True

    def _if(self) -> bool:
        a = self.pick()
        if a is None:
            return False
        from ..ir.builders import less, sum as sum_

        cond = less(sum_(a.expr), ir.const(0.0, self.dtype))
        then = ir.negative(a.expr) if self.rnd.random() < 0.5 else ir.nn.relu(a.expr)
        other = ir.multiply(a.expr, self.const(()))
        self.add(ir.If(cond, then, other), a.shape, a.bound, a)
        return True

    def _rank5(self) -> bool:
        a = self.pick(lambda v: len(v.shape) == 4)
        if a is None:
            return False
        from ..ir.builders import expand_dims

        axis = self.rnd.choice([0, 2, 4])
        shape = a.shape[:axis] + (1,) + a.shape[axis:]
        self.add(expand_dims(a.expr, axis=axis), shape, a.bound, a)
        return True

    # -- nested scopes ---------------------------------------------------------------
    def fresh(self, prefix: str, shape: Optional[tuple]) -> ir.Var:
        self.serial += 1
        ty = None if shape is None else ir.TensorType(shape, self.dtype)
        return ir.var(f"{prefix}{self.serial}", ty)

    def nested(self, pool: list, calls: list, steps: int, shape: Optional[tuple] = None) -> tuple:
        """Run ``steps`` steps as a nested scope over ``pool``: ``(result, lets)`` where
        ``result`` is the last value made (of ``shape``, when given; ``None`` if none is)
        and ``lets`` the bindings the scope's result must be wrapped in."""
        saved = self.pool, self.bindings, self.calls
        self.pool, self.bindings, self.calls = list(pool), [], list(calls)
        start = len(self.pool)
        self.depth += 1
        try:
            done = attempts = 0
            while done < steps and attempts < steps * 20:
                attempts += 1
                if self.step(self.rnd.choices(*self.kinds)[0]):
                    done += 1
            made = [v for v in self.pool[start:] if shape is None or v.shape == shape]
            return (made[-1] if made else None), self.bindings
        finally:
            self.depth -= 1
            self.pool, self.bindings, self.calls = saved

    def _closure(self) -> bool:
        a = self.pick()
        if a is None or self.depth >= _MAX_DEPTH:
            return False
        y = _Value(self.fresh("y", a.shape), a.shape, a.bound)
        result, lets = self.nested(self.pool + [y], self.calls, self.rnd.randint(1, 3))
        if result is None:
            result = _Value(ir.negative(y.expr), a.shape, a.bound)
        fn = ir.Function([y.expr], _wrap(lets, result.expr))
        r = self.rnd.random()
        callee: ir.Expr = fn
        if r < 0.35:  # let %f = fn ...; %f(...)
            callee = self.fresh("f", None)
            self.bindings.append((callee, fn))
        self.add(ir.Call(callee, [a.expr]), result.shape, result.bound, a)
        if r > 0.7:  # a second call of the same function
            b = self.pick(lambda v: v.shape == a.shape and v.bound <= a.bound)
            if b is not None:
                self.add(ir.Call(callee, [b.expr]), result.shape, result.bound, b)
        return True

    def _global(self) -> bool:
        if self.depth >= _MAX_DEPTH or not self.pool:
            return False
        if self.functions and self.rnd.random() < 0.3 and self._call_global(self.rnd.choice(self.functions)):
            return True
        args = [self.pick() for _ in range(self.rnd.randint(1, 2))]
        params = [_Value(self.fresh("q", v.shape), v.shape, v.bound) for v in args]
        result, lets = self.nested(params, [], self.rnd.randint(1, 3))
        if result is None:
            result = _Value(ir.negative(params[0].expr), params[0].shape, params[0].bound)
        attrs = {"Inline": 1} if self.rnd.random() < 0.3 else None
        fn = ir.Function([p.expr for p in params], _wrap(lets, result.expr), attrs=attrs)
        entry = (ir.GlobalVar(f"g{len(self.functions)}"), fn, [v.shape for v in args], [v.bound for v in args], result)
        self.functions.append(entry)
        gv, result = entry[0], entry[4]
        self.add(ir.Call(gv, [v.expr for v in args]), result.shape, result.bound, *args)
        return True

    def _call_global(self, entry: tuple) -> bool:
        gv, _, shapes, bounds, result = entry
        args = [self.pick(lambda v, s=s, b=b: v.shape == s and v.bound <= b) for s, b in zip(shapes, bounds)]
        if any(v is None for v in args):
            return False
        self.add(ir.Call(gv, [v.expr for v in args]), result.shape, result.bound, *args)
        return True

    def _dead_let(self) -> bool:
        a = self.pick()
        if a is None:
            return False
        value = ir.negative(a.expr) if self.rnd.random() < 0.5 else a.expr
        self.bindings.append((self.fresh("d", a.shape if self.rnd.random() < 0.5 else None), value))
        return True

    def _scoped_if(self) -> bool:
        a = self.pick()
        if a is None or self.depth >= _MAX_DEPTH:
            return False
        from ..ir.builders import less, sum as sum_

        cond = less(sum_(a.expr), ir.const(0.0, self.dtype))
        branches, bound = [], a.bound
        for _ in range(2):
            result, lets = self.nested(self.pool, self.calls, self.rnd.randint(1, 3), a.shape)
            if result is None:
                result = _Value(ir.negative(a.expr), a.shape, a.bound)
            branches.append(_wrap(lets, result.expr))
            bound = max(bound, result.bound)
        self.add(ir.If(cond, *branches), a.shape, bound, a)
        return True


def _wrap(lets: list, body: ir.Expr) -> ir.Expr:
    for var, value in reversed(lets):
        body = ir.Let(var, value, body)
    return body


def random_graph(seed: int, num_nodes: int = 20, *, num_params: Optional[int] = None,
                 lets: bool = False, tuples: bool = False, ifs: bool = False, rank5: bool = False,
                 kinds: Optional[Sequence[str]] = None, dtype: str = "float32",
                 symbolic: bool = False, closures: bool = False, functions: bool = False,
                 dead_lets: bool = False, scopes: bool = False) -> ir.IRModule:
    """A seeded, well-typed random module whose ``main`` has 1–3 tensor parameters.

    :param seed: the same seed always gives the same program
    :param num_nodes: number of building steps (each adds one to a few calls)
    :param num_params: 1, 2 or 3 parameters (drawn from the seed when ``None``)
    :param lets: bind about a third of the values with ``let`` (annotated variables)
    :param tuples: build tuples with ``TupleGetItem`` and return a tuple when several
        results are left over
    :param ifs: build ``if`` expressions (on the sign of a sum) choosing between two values
    :param rank5: make 5-D values (``expand_dims`` of 4-D ones) that later steps use
    :param kinds: restrict the steps to these :data:`KINDS`
    :param dtype: a float dtype for parameters and constants
    :param symbolic: the batch, height and width of the parameters are the size variables
        ``n``, ``h`` and ``w`` (channels and weights stay static): the program is valid for
        every binding with ``n >= 1`` and ``h, w >= MIN_SIZE`` (the same seed gives the
        same steps as without it, but for the choices that need static sizes)::

            def @main(%p0: Tensor[(n, 3, h, w), float32], %p1: Tensor[(w), float32]) { ... }
    :param closures: build function literals over a parameter and values of the enclosing
        scope (captured), called in place, bound with ``let`` or called twice
    :param functions: build global functions ``@g0``, ``@g1``, ... (about a third marked
        ``Inline=1``) over their own parameters, and call them (some more than once)
    :param dead_lets: bind values with ``let`` variables nothing uses
    :param scopes: build ``if`` expressions whose branches are nested scopes of a few
        steps over the enclosing values (closures, globals and scoped ifs nest two deep)::

            def @g0(%q1: Tensor[(1, 3, 4, 4), float32], Inline=1) { ... }
            def @main(%p0: Tensor[(1, 3, 4, 4), float32]) {
              %0 = negative(%p0);
              let %f3 = fn (%y2: Tensor[(1, 3, 4, 4), float32]) { add(%y2, %0) };
              if (...) { @g0(%f3(%0)) } else { multiply(%0, 2f) }
            }

        All four default to off, so that a seed gives the program it always gave
    :raises IRError: for an unknown kind or a bad parameter count
    """
    weights = dict(KINDS)
    if kinds is not None:
        unknown = [k for k in kinds if k not in KINDS]
        if unknown:
            raise IRError(f"random_graph: unknown kind {unknown[0]!r}; kinds: {', '.join(KINDS)}")
        weights = {k: w for k, w in KINDS.items() if k in kinds}
    flags = {"tuples": tuples, "ifs": ifs, "rank5": rank5, "closures": closures, "functions": functions,
             "dead_lets": dead_lets, "scopes": scopes}
    for kind, flag in _OPT_IN.items():
        if not flags[flag]:
            weights.pop(kind, None)
    if not weights:
        raise IRError("random_graph: no kinds left to draw from; pass at least one of "
                      + ", ".join(k for k in KINDS if k not in _OPT_IN))
    b = _Builder(seed, dtype, lets, tuples)
    rnd = b.rnd
    if num_params is None:
        num_params = rnd.randint(1, 3)
    if not 1 <= num_params <= 3:
        raise IRError(f"random_graph: num_params must be 1, 2 or 3, got {num_params}")
    c = rnd.choice([2, 3, 4])
    h = rnd.choice([4, 5, 6])
    w = rnd.choice([4, 5, 6])
    n = 1
    if symbolic:
        n, h, w = ir.size_var("n"), ir.size_var("h"), ir.size_var("w")
    params = []
    for i in range(num_params):
        shape = (n, c, h, w) if i == 0 else rnd.choice([(n, c, h, w), (n, c, h, w), (1, c, 1, 1), (w,)])
        p = ir.var(f"p{i}", ir.TensorType(shape, dtype))
        params.append(p)
        b.pool.append(_Value(p, shape, 1.0))
    names = list(weights)
    wts = [weights[k] for k in names]
    b.kinds = (names, wts)
    steps = 0
    attempts = 0
    while steps < num_nodes and attempts < num_nodes * 20:
        attempts += 1
        if b.step(rnd.choices(names, wts)[0]):
            steps += 1
    if steps == 0:  # nothing applicable (e.g. only "dense" on a rank-1 parameter)
        b.add(ir.negative(b.pool[0].expr), b.pool[0].shape, 1.0, b.pool[0])
    out_value = b.pool[-1]
    out = out_value.expr
    out_shape = out_value.shape
    rest = []
    for v in b.pool[:-1]:
        if v.uses or v.expr in params:
            continue
        if _broadcast(out_shape, v.shape) == out_shape and rnd.random() < 0.8:
            out = ir.add(out, v.expr)
        else:
            rest.append(v.expr)
    if tuples and rest:
        out = ir.Tuple([out] + rest[:3])
    mod = ir.IRModule.from_expr(ir.Function(params, _wrap(b.bindings, out)))
    for gv, fn, *_ in b.functions:
        mod[gv] = fn
    return mod
