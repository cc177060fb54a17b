"""ONNX ``Loop`` and ``Scan`` at import, unrolled (see :mod:`.control` for ``If``).

With static shapes a loop's trip count is usually known at import: a ``Scan`` runs once per
element of its scanned axis, a ``Loop`` its constant trip count, or until its condition,
which must fold to a constant in every iteration, turns false (``for`` loops exported from
PyTorch). Each iteration is the body's nodes, renamed, with the body's inputs bound to the
values of the iteration before::

    Loop(M=3, cond=true, a0, body={i, c, a -> c, a + x})
    ->  add(add(add(%a0, %x), %x), %x)

A ``Scan`` over a dynamic axis (and a recurrent layer over a dynamic sequence, see
:mod:`.convert_rnn`) cannot be unrolled: its body becomes a recursive function instead,
called once per step until the counter reaches the axis' size (:func:`recurrence`). Each
step's outputs are written into buffers of the whole length, so every type stays exact::

    let %loop = fn (%t: int64, %h: Tensor[(batch, 16)], %ys: Tensor[(seq, batch, 16)]) {
      if (less(%t, shape_value(values=seq))) {
        %loop(add(%t, 1), <h'>, where(equal(<0 .. seq-1>, %t), expand_dims(<h'>, axis=0), %ys))
      } else { (%h, %ys) }
    };  %loop(0, %h0, zeros(shape=[seq, batch, 16]))
"""
from __future__ import annotations

from typing import Any

import numpy as np
from onnx import AttributeProto, NodeProto

from passhost import ir
from passhost.errors import FormatError

from .build import call, reshape
from .control import defined_names, rename_branch
from .node import ConversionError

__all__ = ["Unroll", "MAX_ITERATIONS", "MAX_UNROLLED_NODES", "recurrence", "count_value"]


#: iterations above which an unrolled loop is an error (a loop whose condition never turns false)
MAX_ITERATIONS = 100_000
#: body nodes one import may unroll in all (nested loops multiply): a bound on the graph a
#: model's loops can make the importer build
MAX_UNROLLED_NODES = 2_000_000


def _int_value(n: NodeProto, what: str, expr: Any) -> int:
    if type(expr) is not ir.Constant or np.asarray(expr.data).size != 1:
        raise ConversionError(f"{n.op_type} node {n.name or n.output[0]!r}: its {what} must be known at import "
                              "time; passhost unrolls loops whose trip count and condition are known then (give "
                              "static input shapes with --input-shape)")
    return int(np.asarray(expr.data).reshape(-1)[0])


class Unroll:
    """A ``Loop`` or ``Scan`` node on the importer's stack, unrolled: popped before each
    iteration, :meth:`step` binds the body's inputs (the carried values, the iteration
    number, the slices of the scanned inputs) and returns the body's nodes, renamed for that
    iteration, followed by itself; after the last iteration :meth:`outputs` gives the node's
    outputs (the final carried values, the per-iteration outputs stacked).

    The trip count must be known at import: a ``Scan``'s from its inputs' static shapes, a
    ``Loop``'s from its constant trip count or its condition, which must fold to a constant
    in every iteration (as ``for`` loops exported from PyTorch have it). A ``Scan`` over a
    dynamic axis is converted once instead, over a step counter and variables for the
    carried values, and :meth:`outputs` makes it a :func:`recurrence`."""

    __slots__ = ("node", "scan", "body", "own", "t", "count", "carried", "per_step", "xs", "in_axes", "attrs", "cond",
                 "last", "budget", "loop")

    def __init__(self, n: NodeProto, inputs: list, budget: list) -> None:
        self.node = n
        self.budget = budget  # [body nodes the import may still unroll], shared by its loops
        self.scan = n.op_type == "Scan"
        graphs = {a.name: a.g for a in n.attribute if a.type == AttributeProto.GRAPH}
        if "body" not in graphs:
            raise FormatError(f"{n.op_type} node {n.name or n.output[0]!r} has no body graph: the model is malformed")
        self.body = graphs["body"]
        self.own = defined_names(self.body)  # (the names each iteration's prefix must not clash with)
        self.attrs = {a.name: list(a.ints) if a.type == AttributeProto.INTS else a.i for a in n.attribute
                      if a.type in (AttributeProto.INT, AttributeProto.INTS)}
        self.t = 0
        self.last = None  # the previous iteration's (renamed) body output names
        self.per_step: list = []  # the body's per-iteration (scan) output expressions, one list per iteration
        self.loop = None  # a Scan over a dynamic axis: (counter, carried variables), its body converted once
        if self.scan:
            m = int(self.attrs.get("num_scan_inputs", 0))
            self.carried, self.xs = list(inputs[:len(inputs) - m]), list(inputs[len(inputs) - m:])
            self.in_axes = self._axes("scan_input_axes", self.xs)
            lengths = {ir.infer_type(x).checked_type.shape[a] for x, a in zip(self.xs, self.in_axes)}
            if any(d is ir.ANY for d in lengths):
                raise ConversionError(f"Scan node {n.name or n.output[0]!r}: the length of the axis it scans is "
                                      "unknown (?) at import")
            dynamic = [d for d in lengths if type(d) is not int]
            if dynamic:  # (ONNX: the scanned axes are alike; the first one's size is the count)
                lengths = {dynamic[0]}
            if len(lengths) != 1:
                raise FormatError(f"Scan node {n.name or n.output[0]!r}: its scanned inputs have different lengths "
                                  f"{sorted(lengths)}")
            self.count = lengths.pop()
            self.cond = True
        else:
            trip, cond = (inputs + [None, None])[:2]
            self.count = None if trip is None else _int_value(n, "trip count", trip)
            self.cond = True if cond is None else bool(_int_value(n, "condition", cond))
            self.carried, self.xs, self.in_axes = list(inputs[2:]), [], []

    def _axes(self, key: str, values: list) -> list:
        axes = self.attrs.get(key) or [0] * len(values)
        if len(axes) != len(values):
            raise FormatError(f"Scan node {self._name()}: {key} has {len(axes)} entries for {len(values)} tensors")
        out = []
        for a, v in zip(axes, values):
            rank = len(ir.infer_type(v).checked_type.shape) + (1 if key == "scan_output_axes" else 0)
            if not -rank <= int(a) < rank:
                raise FormatError(f"Scan node {self._name()}: {key} {int(a)} is out of range for rank {rank}")
            out.append(int(a) + rank if int(a) < 0 else int(a))
        return out

    def _name(self) -> str:
        return repr(self.node.name or (self.node.output[0] if self.node.output else "?"))

    def _more(self) -> bool:
        if not self.cond:
            return False
        if self.count is not None and self.t >= self.count:
            return False
        if self.t >= MAX_ITERATIONS:
            raise FormatError(f"{self.node.op_type} node {self._name()}: it would run more than {MAX_ITERATIONS} "
                              "iterations, which passhost does not unroll")
        return True

    def step(self, env: dict, prefix: str) -> Any:
        """Bind the next iteration's body inputs in ``env`` and return ``(nodes, initializers)``
        of the body renamed with ``prefix``, or ``None`` when the loop is done."""
        n = self.node
        if type(self.count) is not int and self.scan:
            return self._step_once(env, prefix)
        if self.last is not None:  # collect the previous iteration
            try:
                values = [env[x] for x in self.last]
            except KeyError as err:
                raise FormatError(f"{n.op_type} node {n.name or n.output[0]!r}: its body output {err.args[0]!r} is "
                                  "computed by no node of the body") from None
            if not self.scan:
                self.cond = bool(_int_value(n, "condition (the body's first output)", values[0]))
                values = values[1:]
            self.carried = values[:len(self.carried)]
            self.per_step.append(values[len(self.carried):])
            self.t += 1
        if not self._more():
            return None
        self.budget[0] -= len(self.body.node)
        if self.budget[0] < 0:
            raise FormatError(f"{n.op_type} node {self._name()}: unrolling the model's loops would make more than "
                              f"{MAX_UNROLLED_NODES} nodes, which passhost does not unroll")
        names = [prefix + vi.name for vi in self.body.input]
        if self.scan:
            bound = list(self.carried)
            dirs = self.attrs.get("scan_input_directions") or [0] * len(self.xs)
            for x, axis, backward in zip(self.xs, self.in_axes, dirs):
                index = self.count - 1 - self.t if backward else self.t
                bound.append(ir.take(x, ir.const(np.int64(index)), axis=axis))
        else:
            bound = [ir.const(self.t, dtype="int64"), ir.const(True, dtype="bool")] + list(self.carried)
        if len(bound) != len(names):
            raise FormatError(f"{n.op_type} node {n.name or n.output[0]!r}: its body takes {len(names)} inputs, the "
                              f"node gives it {len(bound)}")
        for name, value in zip(names, bound):
            env[name] = ir.infer_type(value)
        nodes, inits, self.last = rename_branch(self.body, prefix, inputs=True)
        return nodes, inits

    def _step_once(self, env: dict, prefix: str) -> Any:
        """A Scan over a dynamic axis: its body converted once, over a step counter and
        variables for the carried values (then :meth:`outputs` makes it a recursive function)."""
        if self.loop is not None:  # the body is converted: collect its outputs
            try:
                self.per_step = [[env[x] for x in self.last]]
            except KeyError as err:
                raise FormatError(f"Scan node {self._name()}: its body output {err.args[0]!r} is computed by no "
                                  "node of the body") from None
            return None
        names = [prefix + vi.name for vi in self.body.input]
        if len(names) != len(self.carried) + len(self.xs):
            raise FormatError(f"Scan node {self._name()}: its body takes {len(names)} inputs, the node gives it "
                              f"{len(self.carried) + len(self.xs)}")
        t = ir.var(prefix + "t", shape=(), dtype="int64")
        states = [ir.var(name, ir.infer_type(x).checked_type) for name, x in zip(names, self.carried)]
        bound = list(states)
        dirs = self.attrs.get("scan_input_directions") or [0] * len(self.xs)
        for x, axis, backward in zip(self.xs, self.in_axes, dirs):
            bound.append(call("take", x, self._index(t, backward), axis=axis, mode="fast"))
        for name, value in zip(names, bound):
            env[name] = ir.infer_type(value)
        self.loop = (t, states)
        nodes, inits, self.last = rename_branch(self.body, prefix, inputs=True)
        return nodes, inits

    def _index(self, t: ir.Var, backward: bool) -> ir.Expr:
        if not backward:
            return t
        return ir.subtract(ir.subtract(count_value(self.count), ir.const(1, "int64")), t)

    def _loop_outputs(self) -> list:
        t, states = self.loop
        values = self.per_step[0]
        k = len(states)
        outs = values[k:]
        dirs = self.attrs.get("scan_output_directions") or [0] * len(outs)
        finals, stacked = recurrence(self.count, t, states, self.carried, values[:k], outs,
                                     [self._index(t, bool(d)) for d in dirs])
        axes = self._axes("scan_output_axes", outs) if outs else []
        for j, a in enumerate(axes):
            if a:  # the stacked axis, first, moved to its place
                rank = len(ir.infer_type(stacked[j]).checked_type.shape)
                perm = list(range(1, rank))
                perm.insert(a, 0)
                stacked[j] = ir.transpose(stacked[j], perm)
        return finals + stacked

    def outputs(self) -> list:
        """The node's output expressions, in its order."""
        n = self.node
        if self.loop is not None:
            return self._loop_outputs()
        k = len(self.body.output) - len(self.carried) - (0 if self.scan else 1)
        if k and not self.per_step:
            raise FormatError(f"{n.op_type} node {n.name or n.output[0]!r} runs no iteration, so its scan outputs "
                              "have no static shape")
        stacked = []
        axes = self._axes("scan_output_axes", self.per_step[0]) if self.scan and k else [0] * k
        dirs = (self.attrs.get("scan_output_directions") or [0] * k) if self.scan else [0] * k
        for j in range(k):
            steps = [values[j] for values in self.per_step]
            if dirs[j]:
                steps.reverse()
            stacked.append(ir.concatenate([ir.expand_dims(s, axes[j]) for s in steps], axis=axes[j]))
        return list(self.carried) + stacked


class _Substitute(ir.ExprMutator):
    """An expression with some variables replaced (the loop body's first step, outside it)."""

    def __init__(self, mapping: dict) -> None:
        super().__init__()
        self.mapping = mapping

    def visit_var(self, var: ir.Var) -> ir.Expr:
        return self.mapping.get(var, var)


def count_value(count: Any) -> ir.Expr:
    """A step count (an int or a size-variable expression) as an int64 scalar."""
    if type(count) is int:
        return ir.const(count, "int64")
    return ir.infer_type(ir.shape_value(count, "int64"))


def recurrence(count: Any, t: ir.Var, states: list, init: list, new_states: list, outs: list,
               out_index: ir.Expr, length: Any = None) -> tuple:
    """``(final states, stacked outputs)`` of a loop of ``count`` steps (a dimension) as a
    recursive function (see the module doc). ``t`` is the step counter (an int64 scalar
    variable, 0 first) and ``states`` the variables of the carried values, which ``init``
    gives first; ``new_states`` and ``outs`` are expressions over them (and over the
    enclosing graph): the carried values after a step and the step's outputs, each of which
    is stacked along a new first axis at ``out_index`` (``t``, or ``count - 1 - t`` for a
    backward scan), in buffers of ``length`` (default ``count``; the positions no step
    writes stay 0). A carried value must keep its type from step to step."""
    n = count_value(count)
    length = count if length is None else length
    state_types = [v.type_annotation for v in states]
    new_states = list(new_states)
    for i, (v, x) in enumerate(zip(states, new_states)):
        got, want = ir.infer_type(x).checked_type, v.type_annotation
        if got == want:
            continue
        # a value of the same shape each step, which typing could not prove (two size variables
        # met): reshaped to the carried type, which the kernel checks at run time
        if isinstance(got, ir.TensorType) and isinstance(want, ir.TensorType) and got.dtype == want.dtype \
                and len(got.shape) == len(want.shape) and not any(d is ir.ANY for d in want.shape) \
                and not any(ir.dims.provably_unequal(a, b) for a, b in zip(got.shape, want.shape)):
            new_states[i] = reshape(x, want.shape)
            outs = [new_states[i] if o is x else o for o in outs]  # (a step output that is the value too)
            continue
        raise ConversionError(f"a loop's carried value {v.name_hint} changes its type from {want} to {got} in a step")
    accs, new_accs, acc_init = [], [], []
    for j, o in enumerate(outs):
        ot = ir.infer_type(o).checked_type
        if not isinstance(ot, ir.TensorType):
            raise ConversionError(f"a loop's per-step output has the type {ot}; passhost stacks tensors")
        at = ir.TensorType((length,) + tuple(ot.shape), ot.dtype)
        acc = ir.var(f"stack{j}", at)
        where = [1] * (1 + len(ot.shape))
        where[0] = length
        if type(length) is int:
            steps = ir.const(np.arange(length, dtype="int64").reshape(where))
        else:
            steps = reshape(call("arange", start=0, stop=length, step=1, dtype="int64"), where)
        mask = ir.equal(steps, out_index[j] if isinstance(out_index, list) else out_index)
        new_accs.append(ir.where(mask, ir.expand_dims(o, 0), acc))
        accs.append(acc)
        if not any(d is ir.ANY for d in ot.shape):
            acc_init.append(call("zeros", shape=at.shape, dtype=at.dtype))
        else:  # a size typing cannot know: zeros shaped like the first step's output, computed from init
            first = _Substitute({t: ir.const(0, "int64"), **dict(zip(states, init))}).visit(o)
            tall = call("zeros", shape=(length,) + (1,) * len(ot.shape), dtype=ot.dtype)
            acc_init.append(call("multiply", tall, ir.expand_dims(call("zeros_like", first), 0)))
    params = [t] + list(states) + accs
    ret = ir.TupleType(state_types + [a.type_annotation for a in accs])
    loop = ir.var("loop", ir.FuncType([p.type_annotation for p in params], ret))
    step = ir.Call(loop, [ir.add(t, ir.const(1, "int64"))] + list(new_states) + new_accs)
    body = ir.If(ir.less(t, n), step, ir.Tuple(list(states) + accs))
    result = ir.Let(loop, ir.Function(params, body, ret_type=ret),
                    ir.Call(loop, [ir.const(0, "int64")] + list(init) + acc_init))
    k = len(states)
    return [ir.TupleGetItem(result, i) for i in range(k)], [ir.TupleGetItem(result, k + j) for j in range(len(outs))]
