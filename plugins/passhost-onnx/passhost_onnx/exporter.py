"""passhost -> ONNX: ``to_onnx(mod, opset=17)`` writes ``@main`` as one ONNX graph.

::

    def @main(%x: Tensor[(1, 3), float32]) { add(nn.relu(%x), meta[Constant][0]) }
    ->
    graph(x: float[1, 3]) { t0 = Relu(x); y = Add(t0, const_0) }   # const_0 an initializer

Constants become initializers. The functions FuseOps makes (``Primitive=1``) and calls
of other global functions are inlined back into the graph: ONNX runtimes optimise a flat
graph best. Inputs keep ``@main``'s parameter names and outputs the names of the model the
module was imported from (``mod.attrs["onnx.outputs"]``), else ``output_0``, ``output_1``...

The export in three steps:

1. the composite patterns the family modules declare beside their converters
   (:mod:`.composites`) are matched in ``@main`` (fused functions inlined): each match
   stands for one ONNX operator (the partition's decision; no function is built);
2. every call is written 1:1 through the operator emitters (:mod:`.emit`), every
   composite's root through its emitter, on the values of the match's leaves;
3. what must stay at the ONNX level goes through one :class:`~.node_view.NodeView` of the
   written nodes (:func:`_one_d_back`, :func:`_transpose_pairs`, the attention heads and
   the QLinear join), built once. A graph output cannot be lost: a match never takes a
   value read outside it, and the view never drops the writer of a graph output.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np
import onnx
from onnx import helper, numpy_helper

from passhost import ir
from passhost.errors import FormatError
from passhost.ir.rewrite import KEEP_TYPES, RuleTable, walk

from . import emit_ops  # noqa: F401  (registers its emitters)
from .emit_qnn import join_qlinear_conv
from .node_view import NodeView
from .composites import composite_parts
from .control import all_nodes
from .local_functions import emit_function_call, function_protos, kept_function
from .dim_values import DimValues, dim_sources, onnx_dims
from .model_fields import keep_model_fields
from .dtypes import raw_bytes, to_onnx_type
from .emit import EMITTERS
from .emit_llm import llm_peepholes
from .opaque import OPAQUE

__all__ = ["to_onnx", "MIN_OPSET", "MAX_OPSET", "TARGETS"]

MIN_OPSET = 13
MAX_OPSET = 23
#: what ``target=`` takes: standard ONNX, or onnxruntime's contrib operators where they do more
TARGETS = ("", "onnx", "onnxruntime")


_A = onnx.AttributeProto


def attribute(name: str, value: Any) -> onnx.AttributeProto:
    """``helper.make_attribute(name, value)``: the same proto, made directly for an int, a
    float, a string or a non-empty list of ints or of numbers (everything else goes to
    ``make_attribute``)."""
    t = type(value)
    if t is int:
        return _A(name=name, type=_A.INT, i=value)
    if t is float:
        return _A(name=name, type=_A.FLOAT, f=value)
    if t is str:
        return _A(name=name, type=_A.STRING, s=value.encode("utf-8"))
    if (t is list or t is tuple) and value:
        kinds = set(map(type, value))
        if kinds == {int}:
            return _A(name=name, type=_A.INTS, ints=value)
        if kinds <= {int, float}:
            return _A(name=name, type=_A.FLOATS, floats=value)
    return helper.make_attribute(name, value)


class Emitter:
    """Collects the nodes and initializers of one graph; emitters call :meth:`node`."""

    def __init__(self, opset: int, target: str = "") -> None:
        self.opset = opset
        #: "" (standard ONNX) or "onnxruntime" (its com.microsoft operators where they do more)
        self.target = target
        self.nodes: list = []
        self.inits: list = []
        self._const_names: dict = {}
        self._count = 0
        self.domains: dict = {}
        #: initializer name -> its array (emitters reshape constant arguments at export)
        self.values: dict = {}
        #: output name -> tensor shape (the peepholes read it)
        self.shapes: dict = {}
        self.dtypes: dict = {}   # a value's dtype, where its call said (the value_info written back)
        #: names the subgraphs of If nodes read (their uses are invisible to the peepholes' scan)
        self.captured: set = set()
        #: the graph's output names: read from outside, so no peephole may take their node
        self.outputs: set = set()
        #: a ConvInteger's or a requantizing QuantizeLinear's output -> what joins them into
        #: QLinearConv (see emit_qnn)
        self.quantized: dict = {}
        #: run-time values of symbolic dimensions (see :mod:`.dim_values`)
        self.dim_values = DimValues(self, {})
        #: every name the graph uses so far (the model's own names kept, fresh ones around them)
        self.taken: set = set()
        #: node names given so far
        self.node_names: set = set()
        #: initializer -> the initializer it is a reshaped copy of
        self.copies: dict = {}
        #: the model-local functions the graph calls (:mod:`.local_functions`): GlobalVar -> Function
        self.kept_functions: dict = {}
        #: the composites' matches: id(root) -> Part (:func:`.composites.composite_parts`)
        self.parts: dict = {}

    def fresh(self, hint: str = "t") -> str:
        while True:
            self._count += 1
            name = f"{hint}{self._count}"
            if name not in self.taken:
                return name

    def claim(self, name: str) -> Optional[str]:
        """``name`` for a new value if no value has it yet (the model's own name of a weight
        or a node), else ``None``."""
        if not name or name in self.taken:
            return None
        self.taken.add(name)
        return name

    def node(self, op_type: str, inputs: list, n_out: int = 1, domain: str = "", **attrs: Any) -> list:
        """Add an ONNX node; returns its output names. (``helper.make_node``'s node, built
        without its per-attribute type dispatch for the plain values emitters pass.)"""
        outs = [self.fresh() for _ in range(n_out)]
        node = onnx.NodeProto(op_type=op_type, input=inputs, output=outs)
        if domain:
            node.domain = domain
        if attrs:
            node.attribute.extend([attribute(k, v) for k, v in sorted(attrs.items()) if v is not None])
        self.nodes.append(node)
        return outs

    def one(self, op_type: str, inputs: list, **attrs: Any) -> str:
        return self.node(op_type, inputs, 1, **attrs)[0]

    def const(self, value: Any, dtype: Optional[str] = None, key: Any = None, name: str = "",
              source: str = "") -> str:
        """An initializer holding ``value`` (one per distinct ``key``, e.g. a Constant node),
        named ``name`` (the model's own name of the weight) where that name is free. An
        emitter's reshaped copy of initializer ``source`` takes the source's name at the end
        of the export if the source is then unread (:func:`_names_of_copies`)."""
        if key is not None and key in self._const_names:
            return self._const_names[key]
        arr = np.asarray(value, dtype=dtype)
        name = self.claim(name) or self.fresh("const")
        if source:
            self.copies[name] = source
        self.inits.append((name, arr))
        self.values[name] = arr
        if key is not None:
            self._const_names[key] = name
        return name

    def constant(self, c: ir.Constant) -> str:
        """The initializer of constant node ``c``, under the model's own name of it."""
        return self.const(c.data, key=c, name=_span_name(c))

    def ints(self, values: Any) -> str:
        """A 1-D int64 tensor of ``values``: an initializer, or computed from the inputs'
        shapes where a value is a symbolic dimension."""
        values = list(values)
        for v in values:
            if type(v) is not int:
                return self.dim_values.vector(values)
        return self.const(np.asarray(values, dtype="int64"))


def _value_info(name: str, ty: ir.Type, original: Optional[dict] = None,
                written: Optional[list] = None) -> onnx.ValueInfoProto:
    """A graph input's or output's value info: symbolic dimensions as ``dim_param`` (the
    name the model was read with), or as written in the model it came from (``written``)."""
    if not isinstance(ty, ir.TensorType):
        raise FormatError(f"ONNX graph inputs and outputs are tensors; {name!r} is {ty}")
    dims = onnx_dims(ty.shape, original or {})
    if written is not None and len(written) == len(dims):
        # (a dim_param the original wrote stays, even where passhost finds the size static:
        # the signature a serving stack was written against does not change)
        dims = [w if (isinstance(w, str) and w != "?") else d for d, w in zip(dims, written)]
    return helper.make_tensor_value_info(name, to_onnx_type(ty.dtype), dims)


def _is_function(e: ir.Expr) -> bool:
    return type(e) is ir.Function or type(e) is ir.If  # (an if's branches are its subgraphs)


def _emit_body(em: Emitter, mod: ir.IRModule, body: ir.Expr, env: dict, parts: Optional[dict] = None) -> Any:
    """Emit every node ``body`` needs; returns its value (a name, or a tuple of values). A
    composite's root (``parts``, default ``em.parts``) is written by its emitter.

    A call of no arguments (``ones``/``zeros`` of a run-time size: the scale and shift
    FuseLayerNorm gives a layer norm that has none) is written where it is first read, so
    one that nothing reads writes nothing, not even the ``Shape`` of its size::

        %g = ones(shape=[4*h*w]); nn.layer_norm(%x, %g, %b, center=False, scale=False)
        ->  LayerNormalization(x, [1], [0])          # no Shape(x), Mul, ConstantOfShape
    """
    vals: dict = dict(env)
    parts = em.parts if parts is None else parts
    for e in _order(body, parts):
        if e in vals:
            continue
        t = type(e)
        if t is ir.Var:
            raise FormatError(f"variable %{e.name_hint} is free in @main; bind it or make it a parameter")
        if t is ir.Constant:
            vals[e] = em.constant(e)
        elif t is ir.Tuple:
            vals[e] = tuple(_read(em, mod, vals, f) for f in e.fields)
        elif t is ir.TupleGetItem:
            tup = _read(em, mod, vals, e.tuple_value)
            if not isinstance(tup, tuple):
                raise FormatError(f"tuple access .{e.index} of a tensor")
            vals[e] = tup[e.index]
        elif t is ir.Call:
            part = parts.get(id(e)) if parts else None
            if part is not None:  # a composite's root: its emitter, on the values of the match's leaves
                out = part.tag.emit(em, part, [_read(em, mod, vals, x) for x in part.leaves])
                vals[e] = _typed(em, e, out) if out is not None else _emit_body(em, mod, e, vals, {})
            else:
                vals[e] = _LATER if not e.args else _call_value(em, mod, e, _args(em, mod, vals, e))
        elif t is ir.If:
            vals[e] = _emit_if(em, mod, e, vals)
        elif t in (ir.Function, ir.Op, ir.GlobalVar):
            vals[e] = None  # only ever called, never a value of the graph
        else:
            raise FormatError(f"{t.__name__} cannot be exported to ONNX; run ToGraphNormalForm first")
    return _read(em, mod, vals, body)


#: the value of a call of no arguments not written yet (see :func:`_emit_body`)
_LATER = object()


def _read(em: Emitter, mod: ir.IRModule, vals: dict, e: ir.Expr) -> Any:
    """The value of ``e``, written now if it was left for later."""
    v = vals[e]
    if v is _LATER:
        v = vals[e] = _call_value(em, mod, e, [])
    return v


def _args(em: Emitter, mod: ir.IRModule, vals: dict, call: ir.Call) -> list:
    """The values of ``call``'s arguments; ``None`` for one left for later that its export
    never reads (:func:`_unread`)."""
    args = [vals[a] for a in call.args]
    if _LATER in args:
        unread = _unread(call)
        for i, v in enumerate(args):
            if v is _LATER:
                args[i] = None if i in unread else _read(em, mod, vals, call.args[i])
    return args


def _unread(call: ir.Call) -> tuple:
    """The positions of ``call``'s arguments that its export never reads: a layer norm's
    scale and shift where it has them turned off (called directly, or as the one call of a
    fused function)."""
    op, inner = call.op, call
    if type(op) is ir.Function:
        inner = _single_call(op)
        if inner is None:
            return ()
    elif type(op) is not ir.Op:
        return ()
    if inner.op.name != "nn.layer_norm":
        return ()
    a = inner.attrs
    off = [inner.args[i] for i, on in ((1, a.scale), (2, a.center)) if not on]
    if inner is call:
        return tuple(i for i, x in enumerate(call.args) if any(x is o for o in off))
    return tuple(i for i, p in enumerate(op.params) if any(p is o for o in off))


def _call_value(em: Emitter, mod: ir.IRModule, e: ir.Call, args: list) -> Any:
    """Write call ``e`` of the emitted ``args``: an operator 1:1, a fused function inlined, a
    model-local function as a call of its FunctionProto."""
    op = e.op
    if type(op) is ir.Op:
        return _emit_call(em, e, args)
    if type(op) is ir.Function:
        inner = _single_call(op)
        if inner is not None:  # (most fused functions: no walk of their own)
            return _emit_call(em, inner, _operands(em, inner, dict(zip(op.params, args))))
        return _emit_body(em, mod, op.body, dict(zip(op.params, args)))
    if type(op) is ir.GlobalVar:
        fn = mod[op]
        if kept_function(fn):  # a model-local function: called, written once as a FunctionProto
            start = len(em.nodes)
            out = emit_function_call(em, mod, op, args)
            _name_nodes(em, e, start)
            return out
        return _emit_body(em, mod, fn.body, dict(zip(fn.params, args)))
    raise FormatError(f"a call of {type(op).__name__} cannot be exported to ONNX")


def _order(body: ir.Expr, parts: dict) -> list:
    """``post_order(body)`` as the emission goes (functions not entered, callees not listed),
    a composite's root entered at the leaves of its match: the nodes it holds are its
    emitter's to write."""
    if not parts:
        return ir.post_order(body, skip=_is_function)
    order: list = []
    seen: set = set()
    stack: list = [body]
    pop, push, listed, see, part_of = stack.pop, stack.append, order.append, seen.add, parts.get
    while stack:
        node = pop()
        if node is _LISTED:
            listed(pop())
            continue
        if node in seen:
            continue
        see(node)
        t = type(node)
        if t is ir.Call:
            part = part_of(id(node))
            kids = node.args if part is None else part.leaves
        else:
            kids = () if t is ir.Var or t is ir.Constant or _is_function(node) else ir.children(node)
        if not kids:
            listed(node)
            continue
        push(node)
        push(_LISTED)
        stack.extend([k for k in reversed(kids) if k not in seen])
    return order


#: _order's stack marker: the node below it has all its children listed
_LISTED = object()


def _span_name(e: ir.Expr) -> str:
    """The model's own name of a node (its span's), or ``""``."""
    span = e.span
    return span.name if span is not None and span.name else ""


def _name_nodes(em: Emitter, call: ir.Call, start: int) -> None:
    """The ONNX nodes written for ``call`` (from ``start``) get the name of the model's node
    it came from: one node its name, several ``name/1``, ``name/2``, ... (names stay unique)."""
    name = _span_name(call)
    new = em.nodes[start:]
    if not name or not new:
        return
    if len(new) == 1:
        if name not in em.node_names:
            new[0].name = name
            em.node_names.add(name)
        return
    for k, n in enumerate(new, 1):
        label = f"{name}/{k}"
        if label not in em.node_names and not n.name:
            n.name = label
            em.node_names.add(label)


def _single_call(fn: ir.Function) -> Optional[ir.Call]:
    """The body of ``fn`` when it is one operator call on parameters and constants (what
    FuseOps makes of an operator alone in its group), else ``None``."""
    body = fn.body
    if type(body) is not ir.Call or type(body.op) is not ir.Op:
        return None
    for a in body.args:
        if type(a) is not ir.Var and type(a) is not ir.Constant:
            return None
    return body


def _operands(em: Emitter, call: ir.Call, env: dict) -> list:
    """The values of ``call``'s arguments (see :func:`_single_call`): a parameter's from
    ``env``, a constant's initializer."""
    out = []
    for a in call.args:
        if type(a) is ir.Constant:
            out.append(em.const(a.data, key=a))
        elif a in env:
            out.append(env[a])
        else:
            raise FormatError(f"variable %{a.name_hint} is free in @main; bind it or make it a parameter")
    return out


def _emit_if(em: Emitter, mod: ir.IRModule, e: ir.If, vals: dict) -> Any:
    """ONNX ``If``: each branch a subgraph of the nodes it needs beyond the values already
    emitted (which it reads from the enclosing graph), ending in one ``Identity`` per output."""
    ty = e.checked_type
    types = [ty] if isinstance(ty, ir.TensorType) else list(ty.fields) if isinstance(ty, ir.TupleType) else []
    if not types or not all(isinstance(t, ir.TensorType) for t in types):
        raise FormatError(f"an if whose value is {ty} cannot be exported to ONNX (tensors, or a tuple of tensors)")
    cond = _emit_body(em, mod, e.cond, vals)
    graphs = []
    for branch, label in ((e.true_branch, "then"), (e.false_branch, "else")):
        outer, em.nodes = em.nodes, []
        try:
            flat = _flat(_emit_body(em, mod, branch, vals))
            outs = [em.fresh(label) for _ in flat]
            em.nodes.extend(helper.make_node("Identity", [v], [o]) for v, o in zip(flat, outs))
            graphs.append(helper.make_graph(em.nodes, f"{label}_{outs[0]}", [],
                                            [_value_info(o, t) for o, t in zip(outs, types)]))
        finally:
            em.nodes = outer
    for g in graphs:
        em.captured.update(x for n in all_nodes(g) for x in n.input)
    names = em.node("If", [cond], len(types), then_branch=graphs[0], else_branch=graphs[1])
    return names[0] if isinstance(ty, ir.TensorType) else tuple(names)


def _emit_call(em: Emitter, call: ir.Call, args: list) -> Any:
    name = call.op.name
    if name == OPAQUE:
        return _emit_opaque(em, call, args)
    fn = EMITTERS.get(name)
    if fn is None:
        raise FormatError(f"operator {name} has no ONNX export; supported: {', '.join(sorted(EMITTERS))}")
    start = len(em.nodes)
    out = fn(em, call, args)
    if call.span is not None:
        _name_nodes(em, call, start)
    return _typed(em, call, out)


def _typed(em: Emitter, call: ir.Call, out: Any) -> Any:
    """``out``, the value(s) emitted for ``call``, with their shapes and dtypes noted."""
    ty = call.checked_type
    if type(out) is str and type(ty) is ir.TensorType:
        shape = em.shapes[out] = ty.shape
        em.dtypes[out] = ty.dtype
        if not ty.is_static:
            em.dim_values.seen(out, shape)
    elif isinstance(out, tuple) and type(ty) is ir.TupleType:
        for name, field in zip(out, ty.fields):  # (a split's parts: the peepholes read them)
            if isinstance(name, str) and isinstance(field, ir.TensorType):
                em.shapes[name] = tuple(field.shape)
                em.dtypes[name] = field.dtype
    return out


def _emit_opaque(em: Emitter, call: ir.Call, args: list) -> Any:
    node = onnx.NodeProto()
    node.ParseFromString(bytes.fromhex(call.attrs.node))
    outs = [em.fresh() for _ in call.attrs.out_shapes]
    if len(node.output):  # positions kept: "?" for each value passed on, "" for an absent one
        given, made = iter(args), iter(outs)
        node.input[:] = [next(given) if x == "?" else "" for x in node.input]
        node.output[:] = [next(made) if x == "?" else "" for x in node.output]
    else:  # (a call stored before positions were kept)
        node.input.extend(args)
        node.output.extend(outs)
    em.nodes.append(node)
    if node.domain:
        em.domains.setdefault(node.domain, 1)
    return outs[0] if len(outs) == 1 else tuple(outs)


def _flat(val: Any) -> list:
    out, stack = [], [val]
    while stack:
        v = stack.pop()
        if isinstance(v, tuple):
            stack.extend(reversed(v))
        else:
            out.append(v)
    return out


def to_onnx(mod: ir.IRModule, *, opset: int = 17, graph_name: str = "passhost",
            custom_opsets: Optional[dict] = None, target: str = "") -> onnx.ModelProto:
    """Export ``mod``'s ``@main`` to an ONNX model at ``opset`` (13 to 23); ``target="onnxruntime"``
    writes onnxruntime's ``com.microsoft`` operators where they do more (:mod:`.emit_llm`)."""
    model, weights = export_parts(mod, opset=opset, graph_name=graph_name, custom_opsets=custom_opsets,
                                  target=target)
    graph = model.graph
    for name, arr in weights:
        graph.initializer.append(tensor_head(name, arr) if arr.dtype == np.bool_ else _full_tensor(name, arr))
    return model


def _full_tensor(name: str, arr: np.ndarray) -> onnx.TensorProto:
    t = tensor_head(name, arr)
    t.raw_data = raw_bytes(little_endian(arr)).tobytes()
    return t


def little_endian(arr: np.ndarray) -> np.ndarray:
    """``arr`` C-contiguous and little-endian: ONNX's ``raw_data`` layout."""
    if arr.dtype.byteorder == ">":
        arr = arr.astype(arr.dtype.newbyteorder("<"))
    return np.require(arr, requirements="C")  # (not ascontiguousarray: it makes a scalar 1-D)


def tensor_head(name: str, arr: np.ndarray) -> onnx.TensorProto:
    """A TensorProto with ``arr``'s name, type and dims; bools carry their data (int32_data),
    other dtypes get ``raw_data`` from the caller (or the writer streams it)."""
    if arr.dtype == np.bool_:
        return numpy_helper.from_array(arr, name)
    t = onnx.TensorProto()
    t.name = name
    t.data_type = to_onnx_type(arr.dtype)
    t.dims.extend(arr.shape)
    return t


def export_parts(mod: ir.IRModule, *, opset: int = 17, graph_name: str = "passhost",
                 custom_opsets: Optional[dict] = None, target: str = "") -> tuple:
    """``(model without initializers, [(name, array)])``: what :func:`to_onnx` assembles
    and :mod:`.writer` streams to a file without copying the weights into protobuf."""
    if isinstance(opset, bool) or not isinstance(opset, int) or not MIN_OPSET <= opset <= MAX_OPSET:
        raise FormatError(f"opset {opset!r}: passhost exports ONNX opsets {MIN_OPSET} to {MAX_OPSET}")
    if target not in TARGETS:
        raise FormatError(f"target {target!r}: passhost exports for the targets {', '.join(map(repr, TARGETS))} "
                          "('' is standard ONNX)")
    if "main" not in {gv.name_hint for gv in mod.functions}:
        raise FormatError("the module has no @main to export")
    mod = ir.infer_type(mod)
    em = Emitter(opset, target)
    main = _with_composites(em, mod["main"])
    em.dim_values = DimValues(em, dim_sources(main))
    env = {p: p.name_hint for p in main.params}
    em.taken.update(env.values())
    em.taken.update(mod.attrs.get("onnx.outputs", ()))
    if len(set(env.values())) != len(env):
        raise FormatError("@main has two parameters with one name; ONNX input names must be unique")
    for p in main.params:
        if isinstance(p.checked_type, ir.TensorType):
            em.shapes[p.name_hint] = tuple(p.checked_type.shape)  # (emitters' peepholes read them too)
            if not p.checked_type.is_static:
                em.dim_values.seen(p.name_hint, tuple(p.checked_type.shape))
    result = _emit_body(em, mod, main.body, env)
    em.dim_values.tensors.clear()  # (the peepholes' targets must not read a later tensor's shape)
    out_types = _flat_types(main.body.checked_type)
    values = _flat(result)
    names = list(mod.attrs.get("onnx.outputs", ()))
    if len(names) != len(values):
        names = [f"output_{i}" for i in range(len(values))]
    produced = {o for n in em.nodes for o in n.output}
    rename: dict = {}
    for value, want in zip(values, names):
        if value in produced and value not in rename and want not in env.values() and value not in em.captured:
            rename[value] = want
            if value in em.shapes:  # (the peepholes read a graph output's shape too)
                em.shapes[want] = em.shapes[value]
        else:
            em.nodes.append(helper.make_node("Identity", [value], [want]))
    if rename:
        em.nodes = [_renamed(n, rename) for n in em.nodes]
    em.shapes.update((p.name_hint, tuple(p.checked_type.shape)) for p in main.params
                     if isinstance(p.checked_type, ir.TensorType))
    em.outputs = set(names)
    _onnx_level(em)
    if em.dim_values.cache:  # a peephole's symbolic target was computed after its reader
        view = NodeView(_topological(em.nodes), [*em.captured, *em.outputs])
        _merge_duplicates(em, view)
        _drop_unread(view)
        em.nodes = view.alive()
    original = dict(mod.attrs.get("onnx.dim_params", ()))
    written = list(mod.attrs.get("onnx.output_dims", ()))
    if len(written) != len(names) or list(mod.attrs.get("onnx.outputs", ())) != names:
        written = [None] * len(names)
    # an initializer nothing reads (a peephole's leftover, or one an emitter wrote a reshaped
    # copy of) is left out
    live = {x for n in em.nodes for x in n.input} | em.captured | set(names)
    inits = _names_of_copies(em, [(name, arr) for name, arr in em.inits if name in live], live)
    graph = helper.make_graph(em.nodes, graph_name,
                              [_value_info(p.name_hint, p.checked_type, original) for p in main.params],
                              [_value_info(n, t, original, w) for n, t, w in zip(names, out_types, written)])
    if mod.attrs.get("onnx.value_info"):
        graph.value_info.extend(_kept_value_info(em, set(names), original))
    opsets = [helper.make_opsetid("", opset)]
    original_opsets = dict(mod.attrs.get("onnx.opset_imports", ()))
    for domain, version in sorted({**em.domains, **(custom_opsets or {})}.items()):
        opsets.append(helper.make_opsetid(domain, original_opsets.get(domain, version)))
    model = helper.make_model(graph, opset_imports=opsets, producer_name="passhost")
    model.ir_version = min(model.ir_version, _ir_version_for(opset))
    if em.kept_functions:
        model.functions.extend(function_protos(em, export_parts, _full_tensor))
        model.ir_version = max(model.ir_version, 8)  # (model-local functions: IR version 8 on)
    keep_model_fields(model, mod.attrs)
    return model, inits


def _renamed(node: onnx.NodeProto, rename: dict) -> onnx.NodeProto:
    """``node``, or a new node reading and writing ``rename``'s names for the old ones."""
    names = rename.keys()
    if names.isdisjoint(node.input) and names.isdisjoint(node.output):
        return node

    new = onnx.NodeProto()
    new.CopyFrom(node)
    new.input[:] = [rename.get(x, x) for x in node.input]
    new.output[:] = [rename.get(o, o) for o in node.output]
    return new


def _onnx_level(em: Emitter) -> None:

    """What stays at the ONNX level, through one view of the written nodes, built once."""
    view = NodeView(em.nodes, [*em.captured, *em.outputs])
    llm_peepholes(em, view)
    if em.quantized:
        join_qlinear_conv(em, view)
    _one_d_back(em, view)
    _transpose_pairs(view)
    em.nodes = view.alive()


def _with_composites(em: Emitter, main: ir.Function) -> ir.Function:
    """``main`` with its fused functions inlined, typed; the matches of the composites of
    ``em``'s opset and target in it go to ``em.parts`` (:mod:`.composites`: one operator may
    span two fused functions)."""
    body = walk(main.body, _INLINE, KEEP_TYPES, skip=_is_function)
    em.parts = composite_parts(body, em.opset, em.target)

    if body is main.body:
        return main
    return ir.infer_type(ir.Function(main.params, body, main.ret_type, main.attrs))  # (the root only)


def _inline(call: ir.Call) -> Optional[ir.Expr]:
    """The body of a fused function (``Primitive=1``) ``call`` calls, on its arguments."""
    fn = call.op
    if type(fn) is ir.Function and fn.attrs.get("Primitive"):
        body, sub = fn.body, dict(zip(fn.params, call.args))
        if type(body) is ir.Call and all(type(a) is ir.Var or type(a) is ir.Constant for a in body.args):
            # (most fused functions: one operator on the parameters and constants; no walk)
            return body.with_args(tuple(sub.get(a, a) for a in body.args))
        return _substituted(body, sub)
    return None


def _substituted(body: ir.Expr, sub: dict) -> ir.Expr:
    """``body`` (calls, tuples and their items) on ``sub``'s values for its parameters, each
    node rebuilt keeping its type; another kind of node has the generic walk do it."""
    new = dict(sub)
    for e in ir.post_order(body):
        t = type(e)
        if t is ir.Call:
            args = tuple([new.get(a, a) for a in e.args])
            if args != e.args:
                new[e] = e.with_args(args, args_typed=True)
        elif t is ir.TupleGetItem:
            tup = new.get(e.tuple_value)
            if tup is not None:
                new[e] = ir.keep_checked_type(e, ir.TupleGetItem(tup, e.index))
        elif t is ir.Tuple:
            fields = [new.get(f, f) for f in e.fields]
            if any(a is not b for a, b in zip(fields, e.fields)):
                new[e] = ir.keep_checked_type(e, ir.Tuple(fields))
        elif t is not ir.Var and t is not ir.Constant and t is not ir.Op:
            return walk(body, None, KEEP_TYPES, memo=dict(sub))
    return new.get(body, body)


_INLINE = RuleTable([(ir.Call, _inline)])


def _kept_value_info(em: Emitter, outputs: set, original: dict) -> list:
    """The types of the graph's intermediate values, for a model that came with them (its
    ``value_info``): each value a call made, typed as the IR typed it, symbolic dimensions as
    ``dim_param``. A node an emitter adds inside an operator's decomposition has none."""
    out = []
    for n in em.nodes:
        for name in n.output:
            dtype = em.dtypes.get(name)
            if dtype is not None and name not in outputs and name in em.shapes:
                out.append(helper.make_tensor_value_info(name, to_onnx_type(dtype),
                                                         onnx_dims(em.shapes[name], original)))
    return out


def _names_of_copies(em: Emitter, inits: list, live: set) -> list:
    """A reshaped copy of a weight takes the weight's name when the weight itself is not
    written (a bias the export reshaped to ``(C, 1, 1)`` and back keeps its name): ``inits``
    renamed, and the nodes reading a copy new nodes reading the weight's name."""
    if not em.copies:
        return inits
    rename: dict = {}
    for name, source in em.copies.items():
        root = source
        while root in em.copies:
            root = em.copies[root]
        if name in live and root not in live and root not in rename.values() and not root.startswith("const"):
            rename[name] = root
    if not rename:
        return inits
    em.nodes = [_renamed(n, rename) for n in em.nodes]
    return [(rename.get(name, name), arr) for name, arr in inits]



#: initializers of at most this many bytes are compared by value when duplicates merge
_SMALL_BYTES = 256


def _merge_duplicates(em: Emitter, view: NodeView) -> None:
    """Nodes that compute the same thing once (export-level CSE over ``view``, in topological
    order): the shape arithmetic of symbolic dimensions repeats itself across the graph (each
    reshape target written where it is needed). Small equal initializers become one first,
    so nodes reading equal constants are seen to be equal::

        r1 = Range(const55 (=0), t57, const58 (=1));  r2 = Range(const60 (=0), t57, const63 (=1))
        ->  r1 alone, r2's readers reading r1

    A duplicate's readers move to the first (each a new node in its place, met as such later
    in the walk); one writing a pinned value (a graph output, a captured value) stays."""
    by_value: dict = {}
    for name, arr in em.inits:
        if arr.nbytes <= _SMALL_BYTES:
            first = by_value.setdefault((arr.dtype.str, arr.shape, arr.tobytes()), name)
            if first != name:
                view.move_readers(name, first)
    seen: dict = {}
    for n in view.current():
        key = (n.op_type, n.domain, tuple(n.input), tuple(a.SerializeToString() for a in n.attribute))
        first = seen.setdefault(key, n)
        if first is not n and len(first.output) == len(n.output) and not view.pinned.intersection(n.output):
            for o, f in zip(n.output, first.output):
                if o:
                    view.move_readers(o, f)
            view.drop(n)


def _drop_unread(view: NodeView) -> None:
    """Nodes whose outputs nothing reads (the shape arithmetic of a target a peephole
    replaced), from the last node back, so what only they read goes too."""
    for n in reversed(view.alive()):
        if not any(view.readers.get(o) or o in view.pinned for o in n.output if o):
            view.drop(n)



def _topological(nodes: list) -> list:
    """``nodes`` with every node after the producers of its inputs, otherwise in their
    order (an explicit stack; nodes already in order stay where they are)."""
    producer = {o: n for n in nodes for o in n.output if o}
    placed: set = set()
    out: list = []
    for root in nodes:
        stack = [(root, False)]
        while stack:
            n, ready = stack.pop()
            if id(n) in placed:
                continue
            if ready:
                placed.add(id(n))
                out.append(n)
                continue
            stack.append((n, True))
            for x in reversed(n.input):
                p = producer.get(x)
                if p is not None and id(p) not in placed:
                    stack.append((p, False))
    return out


def _ir_version_for(opset: int) -> int:
    try:
        return helper.find_min_ir_version_for([helper.make_opsetid("", opset)])
    except Exception:
        return 8


def _flat_types(ty: ir.Type) -> list:
    out, stack = [], [ty]
    while stack:
        t = stack.pop()
        if isinstance(t, ir.TupleType):
            stack.extend(reversed(t.fields))
        else:
            out.append(t)
    return out


#: the 2-D operators a 1-D one imports as (``convert_lift``), and their attributes with the
#: value the lifted height axis has in each (``pads``: begin and end)
_ONE_D = {"Conv": {"kernel_shape": 1, "strides": 1, "dilations": 1},
          "MaxPool": {"kernel_shape": 1, "strides": 1, "dilations": 1},
          "AveragePool": {"kernel_shape": 1, "strides": 1}}


def _height_free(node: Any) -> Optional[list]:
    """The attributes of a lifted 2-D ``node`` rewritten for 1-D data, if its height axis is
    the lift's (kernel, stride and dilation 1, no padding); else ``None``."""
    neutral = _ONE_D[node.op_type]
    new = []
    for a in node.attribute:
        if a.name in neutral:
            if len(a.ints) != 2 or a.ints[0] != neutral[a.name]:
                return None
            new.append(helper.make_attribute(a.name, [a.ints[1]]))
        elif a.name == "pads":
            if len(a.ints) != 4 or a.ints[0] != 0 or a.ints[2] != 0:
                return None
            new.append(helper.make_attribute("pads", [a.ints[1], a.ints[3]]))
        elif a.name == "storage_order" and a.i != 0:
            return None
        else:
            new.append(a)
    return new


def _reshaped_to(r: Any, shapes: dict, inits: dict) -> Optional[tuple]:
    """The shape reshape node ``r`` makes (its output may be a renamed graph output, which
    ``shapes`` does not know: then its shape initializer says; an empty one makes a scalar)."""
    shape = shapes.get(r.output[0])
    if shape is None and len(r.input) > 1 and r.input[1] in inits:
        target = inits[r.input[1]]
        if target.ndim == 1 and (target > 0).all():
            shape = tuple(int(d) for d in target)
    return shape


def _one_d_back(em: Emitter, view: NodeView) -> None:
    """A 1-D convolution or pooling imports as the 2-D operator between two reshapes (a
    height axis of 1, ``convert_lift``); it goes back out as the 1-D operator::

        Reshape(x[1,8,64] -> [1,8,1,64]), Conv(w[4,8,1,3], kernel_shape=[1,3]), Reshape(-> [1,4,62])
        ->  Conv(x, w[4,8,3], kernel_shape=[3])

    Lifted operators that follow one another directly (a pooling after a convolution stays
    in 2-D between them) go back together. An operator is taken when what it reads comes
    from a reshape of 1-D data or from another operator taken, and everything that reads
    it is a reshape or another operator taken (they then read the 1-D result: its elements
    are in the same order). A reshape to the 1-D shape goes, and so does the reshape in
    front when nothing else reads it."""
    shapes = em.shapes
    lifted = []  # the 2-D operators whose result has a height of 1 (usually none: one scan)
    for n in view.alive():
        if n.op_type in _ONE_D and len(n.output) == 1:
            out = shapes.get(n.output[0])
            if out is not None and len(out) == 4 and out[2] == 1 and n.output[0] not in em.captured:
                lifted.append(n)
    if not lifted:
        return
    inits = {name: arr for name, arr in em.inits}
    attrs: dict = {}  # id(node) -> its 1-D attributes, for the operators that may go back
    for n in lifted:
        w = inits.get(n.input[1]) if n.op_type == "Conv" else None
        if n.op_type == "Conv" and (w is None or w.ndim != 4 or w.shape[2] != 1):
            continue
        new = _height_free(n)
        if new is not None:
            attrs[id(n)] = new

    def lifted_input(n: Any) -> bool:
        up = view.writer(n.input[0])
        if up is None:
            return False
        if id(up) in attrs:
            return True
        s1, s2 = shapes.get(up.input[0]) if up.op_type == "Reshape" else None, shapes.get(n.input[0])
        return s1 is not None and len(s1) == 3 and s2 == (s1[0], s1[1], 1, s1[2])

    changed = True
    while changed:  # drop the candidates whose input or readers do not qualify, to a fixed point
        changed = False
        for n in lifted:
            readers = view.readers_of(n.output[0])
            if id(n) in attrs and (not lifted_input(n) or not readers or any(
                    not (r.op_type == "Reshape" and r.input[0] == n.output[0]) and id(r) not in attrs
                    for r in readers)):
                del attrs[id(n)]
                changed = True
    renamed: dict = {}  # a taken operator's 2-D output -> its 1-D output
    fronts: dict = {}  # the reshapes in front, dropped once nothing reads them
    for n in lifted:  # (graph order: producers first)
        if id(n) in attrs:
            _one_d(em, view, n, attrs, renamed, fronts, inits)
    view.drop(*(r for r in fronts.values() if not view.readers.get(r.output[0])))


def _one_d(em: Emitter, view: NodeView, n: Any, attrs: dict, renamed: dict, fronts: dict, inits: dict) -> None:
    """Lifted operator ``n`` as the 1-D operator (see :func:`_one_d_back`)."""
    shapes, x = em.shapes, n.input[0]
    new = onnx.NodeProto()
    new.CopyFrom(n)
    if x in renamed:
        new.input[0] = renamed[x]
    else:
        up = view.writer(x)
        new.input[0] = up.input[0]
        fronts[id(up)] = up
    if n.op_type == "Conv":
        w = inits[n.input[1]]
        new.input[1] = em.const(w.reshape(w.shape[0], w.shape[1], w.shape[3]))
    del new.attribute[:]
    new.attribute.extend(attrs[id(n)])
    out2 = shapes[n.output[0]]
    out1 = (out2[0], out2[1], out2[3])
    after = [r for r in view.readers_of(n.output[0]) if id(r) not in attrs]
    same = [r for r in after if _reshaped_to(r, shapes, inits) == out1]
    new.output[0] = same[0].output[0] if same else em.fresh()
    renamed[n.output[0]] = new.output[0]
    shapes[new.output[0]] = out1
    view.replace(n, new)
    for r in after:
        if same and r is same[0]:
            view.drop(r)
        else:
            view.move_reader(r, n.output[0], new.output[0])


def _transpose_pairs(view: NodeView) -> None:
    """Two transposes that undo each other go, their reader reading the first one's input
    (an emitter's transpose meeting the import's: GridSample's grid is ``[N, H, W, 2]`` in
    ONNX and ``[N, 2, H, W]`` in TVM's ``image.grid_sample``)::

        Transpose(Transpose(g, perm=[0, 3, 1, 2]), perm=[0, 2, 3, 1])  ->  g
    """
    alive = view.alive()
    if sum(n.op_type == "Transpose" for n in alive) < 2:
        return
    for n in alive:
        if n.op_type != "Transpose" or id(n) not in view.at or n.output[0] in view.pinned:
            continue
        t = view.made(n.input[0], "Transpose")
        if t is None:
            continue
        p1 = [list(a.ints) for a in t.attribute if a.name == "perm"]
        p2 = [list(a.ints) for a in n.attribute if a.name == "perm"]
        if p1 and p2 and len(p1[0]) == len(p2[0]) and [p1[0][i] for i in p2[0]] == list(range(len(p2[0]))):
            view.move_readers(n.output[0], t.input[0])
            view.drop(n, t)
