"""FuseOps: group operator calls into ``Primitive`` functions (TVM's ``relay.transform.FuseOps``).

The algorithm is TVM's (``fuse_ops.cc``, ``analysis/graph_partitioner.cc``):

1. build the dataflow graph of the function (:mod:`.graph`);
2. compute its post-dominator tree (:mod:`.graph`);
3. group nodes with union-find in three phases (:mod:`.partition`);
4. rewrite every group into ``fn (%p0, %p1, ..., Primitive=1) { ... }`` called with the
   group's inputs (this module).

Rewriting rules:

* a group's inputs (arguments produced by another group) become parameters ``p0, p1,
  ...`` in order of first encounter (post-order over the group, arguments left to right),
  annotated with the argument's type; the same argument object maps to one parameter. With
  ``relay.FuseOps.link_params`` set, constant arguments stay inline instead;
* the group's output node builds ``fn (params) -> <its type> { body }`` with ``Primitive=1``
  (``0`` if the body holds no call; ``relay.reshape_only=1`` is added when every call is a
  reshape-like op, as TVM does), called with the actual arguments;
* a tuple that is the output of its group stays a plain tuple; a tuple access that is the
  output of its group becomes a function returning the field when its tuple is in the
  group, and stays a plain access otherwise;
* ``annotation.stop_fusion(x)`` is replaced by ``x`` (it already split the groups);
* functions marked ``Primitive`` or ``Compiler`` are left untouched; ``let``, ``if`` and
  nested functions are rebuilt around fused bodies and are fusion barriers;
* at level 0 nothing fuses: every operator call becomes its own one-call function (even
  scalar constants become parameters).

Everything runs on explicit stacks: a 100,000-deep chain fuses at the default recursion
limit, in time linear in the graph size.
"""
from __future__ import annotations

from typing import Any, Optional

from passhost.errors import ConfigError, PassError, PasshostError
from passhost.ir import (
    Attrs,
    Call,
    Constant,
    Function,
    IRModule,
    Op,
    TensorType,
    Tuple,
    TupleGetItem,
    Var,
    children,
    with_children,
)
from passhost.transform import PassContext, function_pass

from .graph import DataflowGraph, build_graph, is_barrier_function
from .partition import Partition, partition

try:  # pause the cyclic GC while whole graphs are built (a large speed-up, no semantics)
    from passhost.ir import paused_gc as _gc_paused
except ImportError:  # pragma: no cover - older host
    from contextlib import nullcontext as _gc_paused

__all__ = [
    "MAX_DEPTH_KEY",
    "LINK_PARAMS_KEY",
    "DEFAULT_MAX_DEPTH",
    "RESHAPE_OPS",
    "fuse_ops",
    "FuseOps",
    "FuseOpsOptionError",
]

#: PassContext config keys FuseOps reads
MAX_DEPTH_KEY = "relay.FuseOps.max_depth"
LINK_PARAMS_KEY = "relay.FuseOps.link_params"
#: TVM's ``kMaxFusedOps``
DEFAULT_MAX_DEPTH = 256

#: operators TVM marks ``TReshapeOp`` (a group of only these gets ``relay.reshape_only=1``)
RESHAPE_OPS = frozenset({"reshape", "squeeze", "expand_dims", "nn.batch_flatten",
                         "contrib_reverse_reshape", "dyn.reshape", "dyn.squeeze"})
#: operators TVM marks ``TNonComputational`` (their calls are never put into functions)
_NON_COMPUTATIONAL = frozenset({"on_device", "call_lowered", "vm.shape_of", "vm.invoke_tvm_op",
                                "vm.reshape_tensor", "memory.alloc_storage", "memory.alloc_tensor",
                                "memory.kill", "parser.MetaRef"})
_STOP_FUSION = "annotation.stop_fusion"


class FuseOpsOptionError(PasshostError, ValueError):
    """A bad option given to :class:`FuseOps` (e.g. ``fuse_opt_level="2"``)."""


def _non_computational(op: Op) -> bool:
    return op.name in _NON_COMPUTATIONAL or bool(op.definition.extra.get("non_computational", False))


def _is_reshape(op: Op) -> bool:
    return op.name in RESHAPE_OPS or bool(op.definition.extra.get("reshape_op", False))


#: the attributes of a fused function, built once (``Attrs`` are immutable, so shared)
_ATTRS_NO_CALL = Attrs({"Primitive": 0})
_ATTRS_CALLS = Attrs({"Primitive": 1})
_ATTRS_RESHAPE_ONLY = Attrs({"Primitive": 1, "relay.reshape_only": 1})
#: parameter names p0 ... p255 (extended on demand)
_PARAM_NAMES = [f"p{k}" for k in range(DEFAULT_MAX_DEPTH)]


class _GroupInfo:
    """Parameters and call arguments collected for one group's function."""

    __slots__ = ("params", "args", "by_arg", "has_call", "reshape_only")

    def __init__(self) -> None:
        self.params: list = []
        self.args: list = []
        self.by_arg: dict = {}
        self.has_call = False
        self.reshape_only = True

    def param_for(self, arg: Any, ty: Any) -> Var:
        """The parameter standing for ``arg`` (allocated ``p<k>`` on first use)."""
        p = self.by_arg.get(arg)
        if p is None:
            k = len(self.params)
            while k >= len(_PARAM_NAMES):
                _PARAM_NAMES.append(f"p{len(_PARAM_NAMES)}")
            p = Var(_PARAM_NAMES[k], ty)
            self.params.append(p)
            self.args.append(arg)
            self.by_arg[arg] = p
            if type(ty) is not TensorType:
                self.reshape_only = False
        return p

    def call(self, ret_type: Any, body: Any) -> Call:
        """``fn (params) -> ret_type { body }`` called with the group's inputs."""
        if self.has_call:
            attrs = _ATTRS_RESHAPE_ONLY if self.reshape_only else _ATTRS_CALLS
        else:
            attrs = _ATTRS_NO_CALL
        return Call(Function(self.params, body, ret_type, attrs), self.args)


# hot loop: one step per node of the function FuseOps rebuilds into fused groups, each kind in line
def _rewrite(func: Function, graph: DataflowGraph, part: Partition, link_params: bool) -> Function:
    nodes, index, skipped = graph.nodes, graph.index, graph.opaque_functions
    root = part.root
    grp = part.groups()  # the group of every node, resolved once (no merges from here on)
    # new_of[i]: what node i became (itself until rewritten); looked up by position, so an
    # argument costs one dict lookup (its index) however it is used
    new_of = list(nodes)
    index_get = index.get
    infos: dict = {}
    infos_get = infos.get
    op_kind: dict = {}  # Op -> (kind, is reshape); kind 0: fusible, 1: non-computational, 2: stop_fusion

    def new_args(args: tuple, group: int, info: _GroupInfo) -> list:
        """``args`` as seen inside ``group``: members rewritten, inputs as parameters."""
        out = []
        append = out.append
        by_arg = info.by_arg
        for a in args:
            j = index_get(a)
            if j is None:
                append(a)
                continue
            na = new_of[j]
            if grp[j] == group or (link_params and type(na) is Constant):
                append(na)
            else:
                p = by_arg.get(na)
                if p is None:
                    p = info.param_for(na, a.checked_type)
                append(p)
        return out

    def rebuild(node: Any) -> Any:
        t = type(node)
        if t is Call:
            kids = (node.op,) + node.args
        elif t is Tuple:
            kids = node.fields
        elif t is TupleGetItem:
            kids = (node.tuple_value,)
        elif t is Function:
            kids = node.params + (node.body,)
        else:
            kids = children(node)
        new = []
        for k in kids:
            j = index_get(k)
            new.append(k if j is None else new_of[j])
        return with_children(node, tuple(new))

    _Call, _Tuple, _TGI, _Function, _Op, _Var, _Const = Call, Tuple, TupleGetItem, Function, Op, Var, Constant
    GroupInfo = _GroupInfo
    num = part.num_nodes
    _TensorType = TensorType
    names = _PARAM_NAMES
    max_name = len(names)
    for i, node in enumerate(nodes):
        t = type(node)
        if t is _Call:
            op = node.op
            if type(op) is not _Op:
                new = rebuild(node)
            else:
                kind = op_kind.get(op)
                if kind is None:
                    kind = op_kind[op] = (1 if _non_computational(op) else 2 if op.name == _STOP_FUSION else 0,
                                          _is_reshape(op))
                if kind[0] == 0:
                    group = grp[i]
                    if num[group] == 1:
                        # a call alone in its group (most groups of a wide DAG): every
                        # operand is an input; no group record is needed
                        params = []
                        fargs = []
                        out = []
                        reshape_only = kind[1]
                        for a in node.args:
                            j = index_get(a)
                            na = a if j is None else new_of[j]
                            if j is None or (link_params and type(na) is _Const):
                                out.append(na)
                                continue
                            for k in range(len(fargs)):
                                if fargs[k] is na:
                                    out.append(params[k])
                                    break
                            else:
                                k = len(params)
                                ty = a.checked_type
                                p = _Var(names[k] if k < max_name else f"p{k}", ty)
                                params.append(p)
                                fargs.append(na)
                                out.append(p)
                                if type(ty) is not _TensorType:
                                    reshape_only = False
                        fn = _Function(params, node.with_args(tuple(out), False), node.checked_type,
                                       _ATTRS_RESHAPE_ONLY if reshape_only else _ATTRS_CALLS)
                        new_of[i] = _Call(fn, fargs)
                        continue
                    info = infos_get(group)
                    if info is None:
                        info = infos[group] = GroupInfo()
                    # new_args inline (the hot path: every fused operator call)
                    out = []
                    append = out.append
                    by_arg = info.by_arg
                    for a in node.args:
                        j = index_get(a)
                        if j is None:
                            append(a)
                            continue
                        na = new_of[j]
                        if grp[j] == group or (link_params and type(na) is _Const):
                            append(na)
                            continue
                        p = by_arg.get(na)
                        if p is None:
                            p = info.param_for(na, a.checked_type)
                        append(p)
                    call = node.with_args(tuple(out), False)
                    info.has_call = True
                    if not kind[1]:
                        info.reshape_only = False
                    new = info.call(node.checked_type, call) if root[group] == i else call
                elif kind[0] == 1:
                    new = rebuild(node)
                else:
                    a = node.args[0]
                    j = index_get(a)
                    new = a if j is None else new_of[j]
        elif t is _Var or t is _Const:
            continue
        elif t is _Tuple:
            group = grp[i]
            if root[group] == i:
                new = rebuild(node)
            else:
                info = infos_get(group)
                if info is None:
                    info = infos[group] = GroupInfo()
                new = _Tuple(new_args(node.fields, group, info))
        elif t is _TGI:
            group = grp[i]
            info = infos_get(group)
            if info is None:
                info = infos[group] = GroupInfo()
            tv = node.tuple_value
            new_tuple = new_args((tv,), group, info)[0]
            if root[group] == i:
                j = index_get(tv)
                if j is None or grp[j] != group:
                    new = rebuild(node)  # isolated: the tuple comes from another group
                else:
                    new = info.call(node.checked_type, _TGI(new_tuple, node.index))
            else:
                new = _TGI(new_tuple, node.index)
        elif t is _Function:
            if node in skipped:
                continue
            new = rebuild(node)
        else:  # Let, If (GlobalVar and other leaves come back unchanged)
            new = rebuild(node)
        new_of[i] = new
    j = index_get(func)
    return func if j is None else new_of[j]


def fuse_ops(func: Function, fuse_opt_level: int = 2, max_depth: int = DEFAULT_MAX_DEPTH,
             link_params: bool = False) -> Function:
    """Fuse the operator calls of a typed function into ``Primitive`` functions.

    The library form of :class:`FuseOps` (no pass context involved).

    :param func: the function; every expression must have its type (run InferType first)
    :param fuse_opt_level: 0 puts every operator call in its own function; 1 or more
        runs the fusion algorithm
    :param max_depth: the most nodes one fused function may hold
    :param link_params: keep constant arguments inline instead of passing them in
    :returns: the rewritten function (``func`` itself if it is already ``Primitive``)
    :raises IRError: an expression has no type yet
    """
    if not isinstance(func, Function):
        raise PassError(f"FuseOps works on functions, got {type(func).__name__}", "FuseOps")
    if is_barrier_function(func):
        return func
    with _gc_paused():
        graph = build_graph(func)
        part = partition(graph, fuse_opt_level, max_depth)
        return _rewrite(func, graph, part, link_params)


def _ensure_typed(func: Function, mod: Any) -> Function:
    """Run type inference when ``func`` was handed over without types (a direct call of
    the pass on an untyped module; inside a Sequential ``InferType`` ran first)."""
    if func.has_type:
        return func
    from passhost.ir import infer_type

    if isinstance(mod, IRModule):
        infer_type(mod)
    if not func.has_type:
        infer_type(func)
    return func


def _config_value(ctx: Any, key: str, typ: type, default: Any) -> Any:
    value = ctx.config.get(key, default)
    if typ is int:
        ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
        need = "a non-negative int"
    else:
        ok = isinstance(value, bool)
        need = "True or False"
    if not ok:
        raise ConfigError(f"PassContext config {key} must be {need}, got {value!r}")
    return value


@function_pass(opt_level=0, name="FuseOps", required=["InferType"], preserves_types=True)
class FuseOps:
    """Fuse operators into primitive functions (TVM's operator fusion).

    :param fuse_opt_level: ``-1`` (default) uses the opt_level of the current
        :class:`~passhost.transform.PassContext`; ``0`` makes every operator call its own
        function; ``1`` or more fuses (element-wise chains into their producers, convs
        and dense with following element-wise ops, injective ops and tuples).

    Reads the config options ``relay.FuseOps.max_depth`` (default 256: the most
    operators in one function) and ``relay.FuseOps.link_params`` (default False).

    Before::

        def @main(%x: Tensor[(10, 20), float32]) {
          %0 = add(%x, 1f);
          %1 = exp(%0);
          squeeze(%1)
        }

    After ``FuseOps()``::

        def @main(%x: Tensor[(10, 20), float32] /* ty=Tensor[(10, 20), float32] */) -> Tensor[(10, 20), float32] {
          %2 = fn (%p0: Tensor[(10, 20), float32] /* ty=Tensor[(10, 20), float32] */, Primitive=1) -> Tensor[(10, 20), float32] {
            %0 = add(%p0, 1f /* ty=float32 */) /* ty=Tensor[(10, 20), float32] */;
            %1 = exp(%0) /* ty=Tensor[(10, 20), float32] */;
            squeeze(%1) /* ty=Tensor[(10, 20), float32] */
          } /* ty=fn (Tensor[(10, 20), float32]) -> Tensor[(10, 20), float32] */;
          %2(%x) /* ty=Tensor[(10, 20), float32] */
        }
    """

    def __init__(self, fuse_opt_level: int = -1) -> None:
        if isinstance(fuse_opt_level, bool) or not isinstance(fuse_opt_level, int) or fuse_opt_level < -1:
            raise FuseOpsOptionError(
                f"FuseOps: fuse_opt_level must be an int >= -1 (-1 = the PassContext's opt_level), "
                f"got {fuse_opt_level!r}")
        self.fuse_opt_level = fuse_opt_level

    def transform_function(self, func: Function, mod: Any, ctx: Optional[PassContext]) -> Function:
        ctx = PassContext.current()
        level = ctx.opt_level if self.fuse_opt_level == -1 else self.fuse_opt_level
        max_depth = _config_value(ctx, MAX_DEPTH_KEY, int, DEFAULT_MAX_DEPTH)
        link_params = _config_value(ctx, LINK_PARAMS_KEY, bool, False)
        if is_barrier_function(func):
            return func
        return fuse_ops(_ensure_typed(func, mod), level, max_depth, link_params)

