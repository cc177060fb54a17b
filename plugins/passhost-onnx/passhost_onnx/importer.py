"""ONNX -> passhost: ``from_onnx(model)`` builds ``@main`` node by node.

::

    graph(x: float[1, 3]) { y = Relu(x); z = Add(y, c) }     # c an initializer
    ->
    def @main(%x: Tensor[(1, 3), float32]) { add(nn.relu(%x), meta[Constant][0]) }

Every node is converted by the converter for its operator and opset (:mod:`.table`), and
each new call is typed at once, so converters see static shapes. A node whose inputs are
all constants is evaluated at import (shape arithmetic, ``ConstantOfShape`` weights), as
TVM's importer folds them. Operators nobody converts are all reported in one message; an
operator of a custom domain becomes :data:`~.opaque.OPAQUE`.
"""
from __future__ import annotations

import math
import re
from typing import Any, Iterable, Mapping, Optional

import numpy as np
import onnx

from passhost import ir
from passhost.errors import FormatError, PasshostError, UsageError

from . import convert_composite, convert_image, convert_index, convert_math, convert_nn, convert_tensor  # noqa: F401
from . import convert_data_shaped, convert_quant, convert_rnn, convert_scatter, convert_sequence  # noqa: F401
from . import convert_contrib, convert_qcontrib, convert_qlinear, convert_signal, convert_unary  # noqa: F401
from . import convert_attention  # noqa: F401
from . import convert_lift  # noqa: F401,I001  (last: wraps the converters above for 1-D data)
from .convert_tensor import _constant as _constant_converter
from .control import SUBGRAPH_OPS, Join, all_nodes, branches, condition_value, defined_names, rename_branch
from .dtypes import FLOAT_DTYPES, tensor_array, to_dtype
from .functions import MAX_DEPTH, Functions
from .local_functions import FunctionSite, outline
from .reader import full_model
from .shape_chain import SHAPE_OPS, shape_node
from .recurrent import RECURRENT, dynamic_recurrence, recurrent_shapes, without_zero_states
from .model_fields import record_model_fields
from .node import Node
from .opaque import opaque
from .table import BUILTIN, USE_BODY, lookup, merged
from .unroll import MAX_UNROLLED_NODES, Unroll

__all__ = ["from_onnx", "ShapeWarning", "STANDARD_DOMAINS"]

STANDARD_DOMAINS = ("", "ai.onnx")


class ShapeWarning(UserWarning):
    """Kept for compatibility: symbolic dimensions are no longer bound silently, so
    nothing warns with it."""


def _attr_value(attr: onnx.AttributeProto) -> Any:
    kind = attr.type
    A = onnx.AttributeProto
    if kind == A.FLOAT:
        return float(attr.f)
    if kind == A.INT:
        return int(attr.i)
    if kind == A.STRING:
        return attr.s.decode("utf-8", "replace")
    if kind == A.TENSOR:
        return tensor_array(attr.t)
    if kind == A.FLOATS:
        return [float(v) for v in attr.floats]
    if kind == A.INTS:
        return [int(v) for v in attr.ints]
    if kind == A.STRINGS:
        return [s.decode("utf-8", "replace") for s in attr.strings]
    if kind in (A.GRAPH, A.GRAPHS):
        return attr  # converters of control flow read the subgraph themselves
    return onnx.helper.get_attribute_value(attr)


def _domain(d: str) -> str:
    return "" if d in STANDARD_DOMAINS else d


def _tensor_shape(vi: onnx.ValueInfoProto) -> Optional[tuple]:
    t = vi.type.tensor_type
    if not t.HasField("shape"):
        return None
    return tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in t.shape.dim)


class DimNames:
    """The size variables of one model: ONNX's ``dim_param`` strings mapped to IR names.

    A ``dim_param`` that is an identifier (``batch``, ``sequence_length``) is the
    variable's name; one that is an expression over such names (optimum writes
    ``past_sequence_length + 1``) becomes that expression; any other string becomes an
    identifier made from it, remembered so that the export writes the original back. An
    axis with neither ``dim_value`` nor ``dim_param``, or a ``dim_value`` of 0 or -1 (older
    Paddle and TensorFlow exporters' "dynamic"), gets a fresh variable ``<input>_<axis>``.
    """

    def __init__(self, bound: Mapping[str, int]) -> None:
        self.bound = dict(bound)
        self.original: dict = {}   # IR variable name -> the dim_param it came from
        self.taken: set = set()

    def _fresh(self, base: str) -> str:
        name = re.sub(r"[^A-Za-z0-9_]", "_", base) or "d"
        if not (name[0].isalpha() or name[0] == "_"):
            name = "d_" + name
        if name in _RESERVED_DIM_NAMES:
            name += "_"
        out, k = name, 1
        while out in self.taken:
            k += 1
            out = f"{name}_{k}"
        return out

    def var(self, name: str) -> Any:
        self.taken.add(name)
        if name in self.bound:
            return self.bound[name]
        return ir.size_var(name)

    def param(self, text: str) -> Any:
        """The dimension a ``dim_param`` names."""
        if text in self.bound:
            self.taken.add(text)
            return self.bound[text]
        try:
            return ir.dims.parse_dim(text, self.var)
        except (ValueError, PasshostError):
            pass
        for ir_name, orig in self.original.items():
            if orig == text:
                return self.var(ir_name)
        name = self._fresh(text)
        self.original[name] = text
        return self.var(name)

    def unnamed(self, input_name: str, axis: int) -> Any:
        return self.var(self._fresh(f"{input_name}_{axis}"))


_RESERVED_DIM_NAMES = frozenset({"floordiv", "floormod", "min", "max", "Tensor", "fn", "True", "False", "None",
                                 "let", "if", "else", "def", "meta", "type", "free_var", "nullptr"})


def _input_type(vi: onnx.ValueInfoProto, shapes: Mapping, names: DimNames) -> ir.TensorType:
    name = vi.name
    if not vi.type.HasField("tensor_type"):
        raise FormatError(f"input {name!r} is not a tensor (sequences, maps and optionals are not supported)")
    dtype = to_dtype(vi.type.tensor_type.elem_type, f"input {name!r}")
    dims = _tensor_shape(vi)
    if name in shapes:
        given = tuple(shapes[name])
        if dims is not None and len(dims) != len(given):
            raise FormatError(f"--input-shape {name}={','.join(map(str, given))} has {len(given)} dimensions, "
                              f"but input {name!r} has {len(dims)}: {list(dims)}")
        for axis, (want, got) in enumerate(zip(dims or (), given)):
            if isinstance(want, int) and want > 0 and want != got:
                raise FormatError(f"--input-shape gives input {name!r} size {got} on axis {axis}, "
                                  f"but the model fixes it to {want}")
        return ir.TensorType(given, dtype)
    if dims is None:
        raise FormatError(f"input {name!r} has no shape in the model; give one with --input-shape {name}=D1,D2,...")
    out = []
    for axis, d in enumerate(dims):
        if isinstance(d, int) and d > 0:
            out.append(d)
        elif isinstance(d, str) and d != "?":
            out.append(names.param(d))
        else:  # no dim_value or dim_param, or a dim_value of 0 or -1: dynamic
            out.append(names.unnamed(name, axis))
    return ir.TensorType(tuple(out), dtype)


def _given_bindings(graph: onnx.GraphProto, shapes: Mapping, bind_dims: Mapping) -> dict:
    """``--bind-dim`` values, plus those that ``--input-shape`` gives the inputs' named
    dimensions (so every input with the same ``dim_param`` is specialised alike)."""
    bound: dict = {}
    for key, value in (bind_dims or {}).items():
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or int(value) < 0:
            raise UsageError(f"--bind-dim {key}={value!r}: a size must be a non-negative int")
        bound[str(key)] = int(value)
    for vi in graph.input:
        if vi.name not in shapes:
            continue
        dims = _tensor_shape(vi) or ()
        for axis, (d, got) in enumerate(zip(dims, shapes[vi.name])):
            if isinstance(d, str) and d != "?":
                old = bound.setdefault(d, int(got))
                if old != int(got):
                    raise FormatError(f"--input-shape gives {d} = {got} on axis {axis} of {vi.name!r}, but "
                                      f"{old} elsewhere")
    return bound


def _kept(keep_ops: Iterable[str], graph: onnx.GraphProto) -> frozenset:
    """``keep_ops`` checked: a name the model does not use is probably misspelt."""
    if isinstance(keep_ops, str):
        keep_ops = [keep_ops]
    keep = frozenset(keep_ops)
    if not keep:
        return keep
    bad = sorted(k for k in keep if not isinstance(k, str) or not k)
    if bad:
        raise UsageError(f"keep_ops (--keep-op): operator names are non-empty strings, got {bad!r}")
    present = {n.op_type for n in graph.node if _domain(n.domain) == ""}
    unused = sorted(keep - present)
    if unused:
        raise UsageError(f"keep_ops (--keep-op): the model has no {', '.join(unused)} node (its graph uses "
                         f"{', '.join(sorted(present)) or 'no standard operator'}); operator names are ONNX's, "
                         "case-sensitive")
    control = sorted(keep & {"If", "Loop", "Scan"})
    if control:
        raise UsageError(f"keep_ops (--keep-op): {', '.join(control)} cannot be kept (their subgraphs read the enclosing "
                         "graph); passhost imports them itself")
    return keep


def _unsupported(graph: onnx.GraphProto, table: dict, opsets: dict, functions: Functions,
                 keep: frozenset = frozenset()) -> None:
    """Every operator without a converter or a function body, reported at once; and a
    standard node whose number of inputs or outputs ONNX's definition of it does not allow."""
    missing: dict = {}
    schemas: dict = {}
    counts_of: dict = {}  # op_type -> its schema's (min in, max in, min out, max out), or ()
    opset = opsets[""]
    for n in all_nodes(graph):
        op_type, raw = n.op_type, n.domain
        if op_type in SUBGRAPH_OPS and raw in ("", "ai.onnx"):  # its subgraphs' nodes are checked in turn
            continue
        if op_type in keep and raw in ("", "ai.onnx"):  # kept as it is: checked by ONNX's shape inference
            continue
        domain = _domain(raw)
        if lookup(table, domain, op_type, opsets.get(domain, 1)) is None:
            # (a custom-domain operator is kept opaque; one with a body is expanded)
            if not domain and not functions.has_body(raw, op_type, opset):
                missing[op_type] = missing.get(op_type, 0) + 1
                continue
        if not domain:
            counts = counts_of.get(op_type)
            if counts is None:
                known = _schema(op_type, opset, schemas)
                counts = counts_of[op_type] = known[0] if known else ()
            if counts and not (counts[0] <= len(n.input) <= counts[1] and counts[2] <= len(n.output) <= counts[3]):
                _check_arity(n, opset, schemas)
    if missing:
        items = ", ".join(f"{k} (x{v})" for k, v in sorted(missing.items(), key=lambda kv: (-kv[1], kv[0])))
        raise FormatError(f"{len(missing)} unsupported ONNX operator(s) at opset {opsets.get('', '?')}: {items}; "
                          "a plugin can add converters (see docs/onnx.md)")


def _schema(op_type: str, opset: int, schemas: dict) -> tuple:
    """``((min in, max in, min out, max out), {attribute: type})`` of ONNX's ``op_type`` at
    ``opset``, or ``()`` when onnx does not define it (cached in ``schemas``)."""
    key = (op_type, opset)
    known = schemas.get(key)
    if known is None:
        try:
            schema = onnx.defs.get_schema(op_type, opset, "")
            known = ((schema.min_input, schema.max_input, schema.min_output, schema.max_output),
                     {name: int(a.type) for name, a in schema.attributes.items()})
        except Exception:  # no schema (an operator onnx does not define): nothing to check
            known = ()
        schemas[key] = known
    return known


def _label(n: onnx.NodeProto) -> str:
    return f"{n.op_type} node {n.name or (n.output[0] if n.output else '?')!r}"


def _check_arity(n: onnx.NodeProto, opset: int, schemas: dict) -> None:
    """A node with more or fewer inputs or outputs than its ONNX schema allows is malformed:
    one error naming it (converters may then index its inputs and outputs freely)."""
    known = _schema(n.op_type, opset, schemas)
    if not known:
        return
    counts = known[0]
    for what, have, lo, hi in (("input", len(n.input), counts[0], counts[1]),
                               ("output", len(n.output), counts[2], counts[3])):
        if not lo <= have <= hi:
            allowed = str(lo) if lo == hi else f"{lo} or more" if hi >= 2 ** 31 - 1 else f"{lo} to {hi}"
            raise FormatError(f"{_label(n)} has {have} {what}(s), but ONNX's {n.op_type} at opset {opset} takes "
                              f"{allowed}: the model is malformed (onnx.checker.check_model says where); export it again")


def _check_attribute_types(n: onnx.NodeProto, opset: int) -> None:
    """An attribute of another type than ONNX's schema gives it is an error naming it
    (checked when a converter fails, so that the message says what is wrong)."""
    known = _schema(n.op_type, opset, {})
    if not known:
        return
    for attr in n.attribute:
        want = known[1].get(attr.name)
        if want is not None and attr.type != want and attr.type != onnx.AttributeProto.UNDEFINED:
            names = onnx.AttributeProto.AttributeType.Name
            raise FormatError(f"{_label(n)}: attribute {attr.name!r} is {names(attr.type)}, but ONNX's {n.op_type} "
                              f"at opset {opset} takes {names(want)}: the model is malformed; export it again")


def _opaque_types(model: onnx.ModelProto, nodes: list) -> dict:
    """name -> ValueInfoProto for outputs of custom-domain nodes (value_info, else shape inference)."""
    known = {vi.name: vi for vi in (*model.graph.value_info, *model.graph.output)
             if vi.type.tensor_type.HasField("shape")}
    wanted = [o for n in nodes for o in n.output if o]
    if all(o in known for o in wanted):
        return known
    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:  # onnx cannot type it either: the error below names the tensor
        return known
    known.update({vi.name: vi for vi in (*inferred.graph.value_info, *inferred.graph.output)
                  if vi.type.tensor_type.HasField("shape")})
    return known


def _opaque(n: onnx.NodeProto, inputs: list, types: dict, names: Optional["DimNames"] = None,
            opset: int = 0, shapes: Optional[list] = None) -> Any:
    """The opaque call standing for node ``n`` (kept as it is), and its outputs, one per
    output of ``n`` (``None`` for an unused one, named ``""``). The stored node keeps the
    positions of its inputs and outputs (``""`` for an absent one, ``"?"`` for one the call
    passes on), so an optional input or output in the middle stays where it was. An
    output's ``dim_param`` is the model's size variable (``names``), an unnamed dynamic
    dimension ``?``. ``shapes``, when given, are the outputs' shapes, each of ``inputs[0]``'s
    dtype (an operator typed by passhost, as the kept recurrent ones)."""
    if shapes is not None:
        dtype = inputs[0].checked_type.dtype
        return _opaque_call(n, inputs, [s for s, o in zip(shapes, n.output) if o], [dtype] * len(shapes))
    shapes, dtypes = [], []
    label = f"{n.domain}.{n.op_type}" if n.domain else n.op_type
    for o in n.output:
        if not o:
            continue
        vi = types.get(o)
        dims = _tensor_shape(vi) if vi is not None else None
        if dims is None or (names is None and not all(isinstance(d, int) and d >= 0 for d in dims)):
            raise FormatError(f"{'custom ' if n.domain else 'kept '}operator {label} (node {n.name or o!r}): the "
                              f"type of its output {o!r} is unknown; add it to the model's value_info or register "
                              "a converter")
        shapes.append(tuple(d if isinstance(d, int) and d > 0 or d == 0 else
                            names.param(d) if isinstance(d, str) and d != "?" else ir.ANY for d in dims))
        dtypes.append(to_dtype(vi.type.tensor_type.elem_type, f"output {o!r}"))
    if not shapes:
        raise FormatError(f"operator {label} (node {n.name!r}): none of its outputs is used")
    return _opaque_call(n, inputs, shapes, dtypes)


def _opaque_call(n: onnx.NodeProto, inputs: list, shapes: list, dtypes: list) -> tuple:
    bare = onnx.NodeProto()
    bare.CopyFrom(n)
    names = ["?" if x is not None else "" for x in inputs]
    while names and not names[-1]:  # (an absent input at the end is no input)
        names.pop()
    bare.input[:] = names
    bare.output[:] = ["?" if o else "" for o in n.output]
    call = ir.Call(opaque(), [x for x in inputs if x is not None],
                   {"domain": n.domain, "op_type": n.op_type, "node": bare.SerializeToString().hex(),
                    "out_shapes": tuple(shapes), "out_dtypes": tuple(dtypes[:len(shapes)])})
    if len(shapes) == 1:
        values = iter((call,))
    else:
        values = iter([ir.TupleGetItem(call, i) for i in range(len(shapes))])
    return tuple(next(values) if o else None for o in n.output)


#: bytes above which a node of constants is left to FoldConstant rather than evaluated at
#: import: a model's declared shapes must not make the import allocate gigabytes
MAX_IMPORT_FOLD_BYTES = 1 << 28


#: operators the import does not evaluate on constants: as TVM's FoldConstant leaves
#: ``qnn.*`` alone (``fold_qnn=False``), a quantized weight stays an int8 constant behind
#: its ``qnn.dequantize``, and the export writes it back as a ``DequantizeLinear``
_KEEP = frozenset(ir.Op.get(n) for n in ("qnn.quantize", "qnn.dequantize", "qnn.conv2d", "qnn.requantize"))


#: the built-in converters of the operators :func:`.shape_chain.shape_node` evaluates (a
#: plugin's converter for one of them is called as usual)
_SHAPE_CONVERTERS = frozenset(fn for op in SHAPE_OPS for _, fn in BUILTIN.get(("", op), ()))

#: ``_bind_outputs``'s ``foldable`` for nodes whose inputs are shape arithmetic
_SHAPE = "shape"


def _shape_data(x: ir.Expr) -> bool:
    """Whether ``x`` is shape arithmetic the import folds: a ``shape_value`` (dimensions
    of the model's dynamic axes) or a ``shape_of`` of a shape with a ``?``, maybe sliced."""
    if type(x) is not ir.Call or type(x.op) is not ir.Op:
        return False
    name = x.op.name
    if name == "strided_slice":
        return _shape_data(x.args[0])
    return name in ("shape_value", "shape_of", "ndarray_size")


def _constant_node(n: onnx.NodeProto) -> Optional[ir.Constant]:
    """The typed value of a ``Constant`` node of the plain form (one ``value`` tensor, one
    output), read straight from its attribute: what its converter and
    :func:`_bind_outputs` make of it (a constant gets no span there, and folding returns
    it as it is), without building a :class:`Node`, an attribute dict and the fold checks.
    Exporters write a Constant for every index and axis of the shape scaffolding (204 of
    GPT-2's 553 nodes). ``None`` for any other form, and for a tensor whose data do not
    read: the converter takes those, with its errors."""
    attrs = n.attribute
    if len(attrs) != 1 or len(n.output) != 1 or not n.output[0] or len(n.input):
        return None
    a = attrs[0]
    if a.type != onnx.AttributeProto.TENSOR or a.name != "value":
        return None
    try:
        data = tensor_array(a.t)
    except Exception:  # noqa: BLE001 - the converter's path reports it, naming the node
        return None
    return ir.infer_type(ir.Constant(data))


def _known_value(n: onnx.NodeProto, fn: Any, op_type: str, inputs: list, keep: frozenset,
                 opsets: dict) -> Optional[ir.Expr]:
    """The typed value of node ``n`` when the import knows it without converting the node:
    a plain ``Constant`` (:func:`_constant_node`) or shape scaffolding over known values
    (:func:`.shape_chain.shape_node`), their built-in converters in use; else ``None``."""
    if fn is _constant_converter and "Constant" not in keep:
        return _constant_node(n)
    if fn in _SHAPE_CONVERTERS and op_type not in keep:
        return shape_node(n, op_type, inputs, opsets.get("", 1))
    return None


def _customs(graph: onnx.GraphProto, table: dict, opsets: dict, functions: Functions, keep: frozenset) -> list:
    """The nodes of ``graph`` imported opaque: custom-domain operators without a converter
    or a local function, and the standard ones ``keep`` names (each node's fields read once)."""
    out = []
    for n in graph.node:
        raw, op_type = n.domain, n.op_type
        d = _domain(raw)
        if (d and lookup(table, d, op_type, opsets.get(d, 1)) is None and (raw, op_type) not in functions.local) \
                or (not d and op_type in keep):
            out.append(n)
    return out


def _fold(expr: ir.Expr) -> ir.Expr:
    """``expr`` (built from constants only) evaluated to a constant, if it can be, its
    value is at most :data:`MAX_IMPORT_FOLD_BYTES`, and it calls no quantized operator;
    shape arithmetic over the model's dynamic axes folds as far as the dimensions are
    known (:func:`passhost.ir.fold_symbolic`)."""
    if isinstance(expr, ir.Constant) or ir.calls_any(expr, _KEEP):
        return expr
    ty = expr.checked_type
    if isinstance(ty, ir.TensorType) and _nbytes(ty) > MAX_IMPORT_FOLD_BYTES:
        return expr
    try:
        value = ir.evaluate(expr)
    except PasshostError:
        return expr
    return ir.infer_type(ir.Constant(np.asarray(value))) if isinstance(value, np.ndarray) else expr


def _nbytes(ty: ir.TensorType) -> int:
    if not ty.is_static:
        return MAX_IMPORT_FOLD_BYTES + 1
    return math.prod(int(d) for d in ty.shape) * np.dtype(ty.dtype).itemsize


def _initializer_array(name: str, tensor: onnx.TensorProto) -> np.ndarray:
    """The value of initializer ``name``; a tensor whose data does not fit its type and
    dims (a damaged file) is an error naming it."""
    try:
        return tensor_array(tensor)
    except FormatError:
        raise
    except Exception as err:  # numpy_helper on data of the wrong size or kind
        dims = "x".join(map(str, tensor.dims)) or "scalar"
        raise FormatError(f"initializer {name!r} ({to_dtype(tensor.data_type)}[{dims}]): its data does not match "
                          f"its type and dims ({type(err).__name__}: {err}); the model file is damaged or was "
                          "written wrongly: export it again") from None


def from_onnx(model: onnx.ModelProto, *, input_shapes: Optional[Mapping] = None, keep_params: bool = False,
              extra_converters: Optional[list] = None, source: str = "", arrays: Optional[Mapping] = None,
              keep_ops: Iterable[str] = (), bind_dims: Optional[Mapping] = None,
              inline_functions: bool = False) -> Any:
    """Import ``model`` (see :func:`_from_onnx`), with the cyclic GC paused while the graph grows."""
    with ir.paused_gc():
        return _from_onnx(model, input_shapes=input_shapes, keep_params=keep_params,
                          extra_converters=extra_converters, source=source, arrays=arrays, keep_ops=keep_ops,
                          bind_dims=bind_dims, inline_functions=inline_functions)


def _check_bind_dims(bind_dims: Mapping, names: DimNames) -> None:
    known = names.taken | set(names.original.values())
    unknown = sorted(k for k in bind_dims if k not in known)
    if unknown:
        raise UsageError(f"--bind-dim {', '.join(unknown)}: the model's inputs have no such dimension (their "
                         f"size variables: {', '.join(sorted(known)) or 'none, every input is static'})")


def _bind_outputs(n: onnx.NodeProto, outs: Any, inputs: list, foldable: bool, env: dict, source: str,
                  outer: Optional[onnx.NodeProto], outputs: Optional[list] = None) -> None:
    """``env[output] = expression`` for each named output of node ``n`` (``outputs``: its
    output names, when the caller read them already): spanned, typed, and evaluated when
    the node's inputs were all constants."""
    for name, expr in zip(n.output if outputs is None else outputs, outs):
        if not name:
            continue
        if expr is None:  # (an Identity of a missing optional input, say)
            raise FormatError(f"{_label(outer or n)}: output {name!r} of its {n.op_type} has no value (it "
                              "passes on an input the node does not have)")
        if expr.span is None and not any(expr is x for x in inputs):  # not an Identity's input
            _name_new_nodes(expr, inputs,
                            ir.Span(source, name=(outer.name or outer.output[0]) if outer else n.name or name))
        try:
            ir.infer_type(expr)
        except PasshostError as err:
            raise FormatError(f"{n.op_type} node {n.name or name!r}: {err}") from None
        if foldable is _SHAPE:
            folded = ir.fold_symbolic(expr)
            env[name] = expr if folded is None else folded
        else:
            env[name] = _fold(expr) if foldable else expr


def _name_new_nodes(expr: ir.Expr, inputs: list, span: ir.Span) -> None:
    """``span`` (the ONNX node's name) on ``expr`` and on every node the converter built
    for it that has none: a ``Conv`` with a bias imports as ``nn.bias_add(nn.conv2d(..))``,
    and whichever the export writes (one ``Conv``) is named after the model's node."""
    stop = {id(x) for x in inputs if x is not None}
    stack = [expr]
    while stack:
        e = stack.pop()
        if id(e) in stop or e.span is not None or type(e) not in (ir.Call, ir.Tuple, ir.TupleGetItem):
            continue
        ir.set_span(e, span)
        stack.extend(ir.children(e))


def _expand_if(n: onnx.NodeProto, cond: Any, opsets: dict, outer: Any, depth: int, functions: Functions,
               env: dict) -> list:
    """The importer-stack entries that import ``If`` node ``n``: the nodes of the branch a
    constant condition chooses (of both, for a run-time one), then the :class:`Join` that
    binds the node's outputs (see :mod:`.control`)."""
    if cond is None:
        raise FormatError(f"{_label(n)} has no condition input: the model is malformed")
    value = condition_value(n, cond)
    then_g, else_g = branches(n)
    chosen = [then_g] if value is True else [else_g] if value is False else [then_g, else_g]
    parts = []
    for g in chosen:
        nodes, inits, outs = rename_branch(g, functions.prefix("If", defined_names(g)))
        for name, tensor in inits:
            env[name] = ir.infer_type(ir.Constant(_initializer_array(name, tensor)))
        parts.append((nodes, outs))
    entries = [(Join(n, cond, parts[0][1], parts[1][1] if len(parts) == 2 else None), opsets, outer, depth)]
    for nodes, _ in reversed(parts):
        entries.extend((b, opsets, outer or n, depth + 1) for b in reversed(nodes))
    return entries


def _from_onnx(model: onnx.ModelProto, *, input_shapes: Optional[Mapping] = None, keep_params: bool = False,
               extra_converters: Optional[list] = None, source: str = "", arrays: Optional[Mapping] = None,
               keep_ops: Iterable[str] = (), bind_dims: Optional[Mapping] = None,
               inline_functions: bool = False) -> Any:
    """Import ``model``: an :class:`~passhost.ir.IRModule` (with ``keep_params``: and a params dict).

    Dynamic axes stay dynamic: each ``dim_param`` becomes a size variable (see
    :class:`DimNames`), and nothing is bound unless asked.

    :param input_shapes: input name -> concrete shape (specialises that input, and every
        other input's dimensions of the same ``dim_param`` names)
    :param bind_dims: ``dim_param`` name -> size: specialises that variable everywhere
    :param keep_params: floating-point initializers become parameters of ``@main`` (after
        the inputs) and are returned by name; integer ones (shapes, axes) stay constants
    :param extra_converters: ``[(domain, op_type, since, fn)]`` on top of the built-in ones
    :param source: the model's name in spans (default: the graph's name); the expression
        each ONNX node becomes gets the span ``Span(source, name=<node name>)``, so a later
        type error says which node of the model it came from
    :param arrays: initializer name -> its value, for initializers whose bytes the caller
        already holds (:func:`.reader.read_model` hands out the weights of a file in place);
        those initializers' own data fields are not read
    :param keep_ops: standard operators (``op_type`` names, e.g. ``{"LSTM", "GRU"}``) to keep
        as they are, as a custom-domain operator is kept: an opaque call typed by ONNX's
        shape inference, left alone by the passes and written back unchanged (instead of,
        say, an LSTM unrolled into its per-step arithmetic); the interpreter runs it with
        ``onnx.reference``. An LSTM, GRU or RNN over dynamic axes is kept without asking
    :param inline_functions: expand every call of the model's local functions into the
        graph; by default the graph's own calls are kept as global functions
        (:mod:`.local_functions`)
    :raises FormatError: unsupported operators (all of them, with counts), bad shapes, ...
    """
    graph = model.graph
    source = source or graph.name or "onnx model"
    opsets = {_domain(imp.domain): int(imp.version) for imp in model.opset_import}
    opsets.setdefault("", 1)
    table = merged(extra_converters or [])
    functions = Functions(model)
    keep = _kept(keep_ops, graph)
    _unsupported(graph, table, opsets, functions, keep)
    inits = {t.name: t for t in graph.initializer}
    env, params, dim_names = _graph_inputs(graph, dict(input_shapes or {}), bind_dims or {}, inits)
    weights = _initializers(inits, arrays, keep_params, source, env)
    customs = _customs(graph, table, opsets, functions, keep)
    types = _opaque_types(full_model(model, arrays), customs) if customs else {}
    sites: Optional[list] = None if inline_functions or not functions.local else []
    _convert_graph(graph, opsets, env, _Context(table, functions, keep, types, dim_names, source, sites))
    body = _graph_outputs(graph, env)
    body, kept = outline(sites, body, {"main"}) if sites else (body, [])
    mod = ir.IRModule.from_expr(ir.Function(params + [env[n] for n in weights], body))
    for gv, fn in kept:
        mod[gv] = fn
    _record_signature(mod.attrs, model, dim_names, opsets)
    mod = ir.infer_type(mod)
    return (mod, weights) if keep_params else mod


def _graph_inputs(graph: onnx.GraphProto, shapes: dict, bind_dims: Mapping, inits: dict) -> tuple:
    """``(env, params, dim_names)``: a typed variable for each graph input that is not an
    initializer, its dimensions named (``--input-shape`` and ``--bind-dim`` applied)."""
    names = [vi.name for vi in graph.input if vi.name not in inits]
    unknown = sorted(set(shapes) - set(names))
    if unknown:
        raise FormatError(f"--input-shape names {', '.join(map(repr, unknown))}, which the model does not have "
                          f"as an input (its inputs: {', '.join(map(repr, names)) or 'none'})")
    env: dict = {}
    params = []
    dim_names = DimNames(_given_bindings(graph, shapes, bind_dims))
    for vi in graph.input:
        if vi.name in inits:
            continue
        v = ir.infer_type(ir.var(vi.name, _input_type(vi, shapes, dim_names)))
        env[vi.name] = v
        params.append(v)
    _check_bind_dims(bind_dims, dim_names)
    return env, params, dim_names


def _initializers(inits: dict, arrays: Optional[Mapping], keep_params: bool, source: str, env: dict) -> dict:
    """Each initializer into ``env``: a constant named after it (kept as it is when read-only
    and contiguous: its name goes with it to the export), or with ``keep_params`` a float one
    as a parameter; returns those parameters' arrays by name."""
    weights: dict = {}
    for name, tensor in inits.items():
        to_dtype(tensor.data_type, f"initializer {name!r}")
        data = arrays[name] if arrays and name in arrays else _initializer_array(name, tensor)
        if keep_params and data.dtype.name in FLOAT_DTYPES:  # (bfloat16 and float8 are numpy kind "V")
            env[name] = ir.infer_type(ir.var(name, shape=data.shape, dtype=str(data.dtype)))
            weights[name] = data
        else:
            env[name] = ir.set_span(ir.infer_type(ir.Constant(data)), ir.Span(source, name=name))
    return weights


class _Context:
    """What converting one node needs besides the node: the converter table, the model's
    functions, the operators kept as they are and their types, the size variables' names,
    the spans' source, and the local-function calls to outline (``None``: none)."""

    __slots__ = ("table", "functions", "keep", "types", "dim_names", "source", "sites", "unroll_budget")

    def __init__(self, table: Any, functions: Functions, keep: Any, types: dict, dim_names: DimNames, source: str,
                 sites: Optional[list]) -> None:
        self.table, self.functions, self.keep, self.types = table, functions, keep, types
        self.dim_names, self.source, self.sites = dim_names, source, sites
        self.unroll_budget = [MAX_UNROLLED_NODES]  # body nodes the model's loops may still unroll


# hot loop: one step per ONNX node (and per node of every expanded body and unrolled loop);
# the markers of control flow are handled in line, each kind of node by a function of its own
def _convert_graph(graph: onnx.GraphProto, opsets: dict, env: dict, cx: _Context) -> None:
    """Every node of ``graph`` converted into ``env`` (name -> expression), in order."""
    # a stack of (node, its opsets, the model's node it was expanded from, depth): function
    # bodies are pushed in place of their node
    pending = [(n, opsets, None, 0) for n in reversed(graph.node)]
    table, keep, source = cx.table, cx.keep, cx.source
    while pending:
        n, node_opsets, outer, depth = pending.pop()
        if type(n) is Join:  # both branches of an If are converted: bind its outputs
            values, read = n.outputs(env)
            _bind_outputs(n.node, values, read, False, env, source, outer)
            continue
        if type(n) is FunctionSite:  # a graph-level call of a local function, its body converted
            n.record(env)
            continue
        if type(n) is Unroll:  # the next iteration of a Loop or Scan, or its outputs after the last
            _unroll_step(n, node_opsets, outer, depth, pending, env, cx)
            continue
        # (protobuf reads each field anew, a container for the repeated ones: read once)
        op_type = n.op_type
        domain = _domain(n.domain)
        try:
            inputs = [env[i] if i else None for i in n.input]
        except KeyError as err:
            raise FormatError(f"{n.op_type} node {n.name or n.output[0]!r} reads {err.args[0]!r}, which no "
                              "earlier node, input or initializer defines (is the graph topologically sorted?)") \
                from None
        fn = lookup(table, domain, op_type, node_opsets.get(domain, 1))
        value = _known_value(n, fn, op_type, inputs, keep, node_opsets)
        if value is not None:
            env[n.output[0]] = value
            continue
        if not domain and outer is None and (op_type in keep or op_type in RECURRENT):
            if _kept_node(n, op_type, inputs, node_opsets, env, cx):
                continue
        if fn is None:
            entries = _expansion(n, op_type, domain, inputs, node_opsets, outer, depth, env, cx)
            if entries is not None:
                pending.extend(entries)
                continue
        outputs = list(n.output)
        outs = _converted(n, fn, op_type, domain, inputs, outputs, node_opsets, outer, cx)
        if outs is USE_BODY:  # (the converter declined this form: the node's function body)
            pending.extend(_body_entries(n, op_type, domain, inputs, node_opsets, outer, depth, env, cx))
            continue
        present = [x for x in inputs if x is not None]
        foldable = fn is not None and all(isinstance(x, ir.Constant) or _shape_data(x) for x in present)
        if foldable and not all(isinstance(x, ir.Constant) for x in present):
            foldable = _SHAPE  # shape arithmetic over the dynamic axes
        _bind_outputs(n, outs, inputs, foldable, env, source, outer, outputs)


def _unroll_step(n: Unroll, node_opsets: dict, outer: Any, depth: int, pending: list, env: dict,
                 cx: _Context) -> None:
    """The next iteration of a Loop or Scan onto ``pending``, or its outputs bound after the last."""
    step = n.step(env, cx.functions.prefix(n.node.op_type, n.own))
    if step is None:
        _bind_outputs(n.node, n.outputs(), n.carried, False, env, cx.source, outer)
        return
    nodes, inits = step
    for name, tensor in inits:
        env[name] = ir.infer_type(ir.Constant(_initializer_array(name, tensor)))
    pending.append((n, node_opsets, outer, depth))
    pending.extend((b, node_opsets, outer or n.node, depth + 1) for b in reversed(nodes))


def _kept_node(n: onnx.NodeProto, op_type: str, inputs: list, node_opsets: dict, env: dict, cx: _Context) -> bool:
    """A graph-level node imported as it is (``--keep-op``, or a recurrent layer over
    dynamic axes): bound, and ``True``; else ``False``."""
    if op_type in RECURRENT and (op_type in cx.keep or dynamic_recurrence(n, inputs)):
        inputs = without_zero_states(n, inputs)
        outs = _opaque(n, inputs, cx.types, cx.dim_names, shapes=recurrent_shapes(n, inputs))
    elif op_type in cx.keep:
        outs = _opaque(n, inputs, cx.types, cx.dim_names, node_opsets.get("", 1))
    else:
        return False
    _bind_outputs(n, outs, inputs, False, env, cx.source, None)
    return True


def _expansion(n: onnx.NodeProto, op_type: str, domain: str, inputs: list, node_opsets: dict, outer: Any,
               depth: int, env: dict, cx: _Context) -> Optional[list]:
    """The importer-stack entries a node without a converter expands into -- an If's
    branches, a Loop's or Scan's unrolling, a function's body -- or ``None``."""
    functions = cx.functions
    if not domain and op_type == "If":
        if depth >= MAX_DEPTH:
            raise FormatError(f"{_label(outer or n)}: its If branches nest more than {MAX_DEPTH} deep")
        return _expand_if(n, inputs[0] if inputs else None, node_opsets, outer, depth, functions, env)
    if not domain and op_type in ("Loop", "Scan"):
        if op_type == "Scan" and node_opsets.get("", 1) < 9:
            raise FormatError(f"{_label(n)}: Scan of opset 8 (with a batch axis and sequence_lens) is not "
                              "supported; export the model at opset 9 or later")
        if depth >= MAX_DEPTH:
            raise FormatError(f"{_label(outer or n)}: its loop bodies nest more than {MAX_DEPTH} deep")
        return [(Unroll(n, inputs, cx.unroll_budget), node_opsets, outer, depth)]
    if not functions.has_body(n.domain, op_type, node_opsets.get(domain, 1)):
        return None
    if depth >= MAX_DEPTH:
        raise FormatError(f"{_label(outer or n)}: its function bodies nest more than {MAX_DEPTH} deep "
                          f"(at {op_type}; does a local function call itself?)")
    body, body_opsets = functions.expand(n, node_opsets.get(domain, 1),
                                         [None if x is None else x.checked_type for x in inputs])
    entries = []
    if cx.sites is not None and outer is None and (n.domain, op_type) in functions.local:
        entries.append((FunctionSite(n, inputs, functions.local[n.domain, op_type], cx.sites), node_opsets, None,
                        depth))
    entries.extend((b, {**node_opsets, **body_opsets}, outer or n, depth + 1) for b in reversed(body))
    return entries


def _body_entries(n: onnx.NodeProto, op_type: str, domain: str, inputs: list, node_opsets: dict, outer: Any,
                  depth: int, env: dict, cx: _Context) -> list:
    """:func:`_expansion` of a node whose converter returned :data:`~.table.USE_BODY`."""
    entries = _expansion(n, op_type, domain, inputs, node_opsets, outer, depth, env, cx)
    if entries is None:
        raise FormatError(f"{_label(n)}: its converter leaves this form to the operator's function body, "
                          f"and ONNX defines none at opset {node_opsets.get(domain, 1)}")
    return entries


def _converted(n: onnx.NodeProto, fn: Any, op_type: str, domain: str, inputs: list, outputs: list,
               node_opsets: dict, outer: Any, cx: _Context) -> tuple:
    """The expressions of a node's outputs: its converter's, or an opaque call's for a
    custom-domain operator no converter knows."""
    if fn is None:
        if outer is not None and not domain:
            raise FormatError(f"{_label(outer)}: its function body uses {op_type} (opset "
                              f"{node_opsets.get('', '?')}), which passhost has no converter for")
        return _opaque(n, inputs, cx.types, cx.dim_names, node_opsets.get(domain, 1))
    node = Node(op_type, domain, n.name, inputs, {a.name: _attr_value(a) for a in n.attribute},
                outputs, node_opsets.get(domain, 1))
    try:
        result = fn(node)
    except PasshostError:
        raise
    except Exception as err:  # noqa: BLE001 - one message naming the node, never a traceback
        if not domain:
            _check_attribute_types(n, node_opsets[""])
        where = f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', fn)}"
        raise node.error(f"converting it failed ({type(err).__name__}: {err}); its inputs or attributes "
                         "may not be what ONNX allows (onnx.checker.check_model checks the model); if they "
                         f"are, the converter {where} has a bug: report it") from None
    if result is USE_BODY:
        return result
    outs = result if isinstance(result, tuple) else (result,)
    if len(outs) < len([o for o in outputs if o]):
        raise FormatError(f"{node!r}: its converter produced {len(outs)} output(s), the node has "
                          f"{len(outputs)}")
    return outs


def _graph_outputs(graph: onnx.GraphProto, env: dict) -> ir.Expr:
    """The body of ``@main``: the graph's output (a tuple of them for several)."""
    results = []
    for vi in graph.output:
        if vi.name not in env:
            raise FormatError(f"graph output {vi.name!r} is not computed by any node")
        if isinstance(ir.infer_type(env[vi.name]).checked_type, ir.TupleType):
            raise FormatError(f"graph output {vi.name!r} is a sequence; passhost imports sequences inside a graph "
                              "(as tuples), not as its outputs")
        results.append(env[vi.name])
    return results[0] if len(results) == 1 else ir.Tuple(results)


def _record_signature(attrs: Any, model: onnx.ModelProto, dim_names: DimNames, opsets: dict) -> None:
    """What the export writes back as the model had it: output names and dimensions, the
    inputs' dim_params, the opset, and the model's own fields (:mod:`.model_fields`)."""
    graph = model.graph
    attrs["onnx.outputs"] = tuple(vi.name for vi in graph.output)
    if dim_names.original:
        attrs["onnx.dim_params"] = tuple(sorted(dim_names.original.items()))
    attrs["onnx.output_dims"] = tuple(_tensor_shape(vi) if vi.type.HasField("tensor_type") else None
                                      for vi in graph.output)
    attrs["onnx.opset"] = opsets[""]
    record_model_fields(model, attrs)
