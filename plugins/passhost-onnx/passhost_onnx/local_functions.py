"""A model's local functions, kept as functions (issue 36): imported as global functions of
the module, optimised where they are, and written back as the model's ``functions``.

A model whose graph calls its own function ``my.lib::Block`` (``model.functions``)::

    graph(x) { y = my.lib.Block(x, w) }     Block(a, b) { t = MatMul(a, b); out = Relu(t) }

imports as a module with a global function per distinct use, named after the function and
marked with where it came from (``onnx.function``)::

    def @Block(%a: Tensor[(4, 8), float32], %b: Tensor[(8, 8), float32], onnx.function="my.lib::Block") {
      nn.relu(nn.matmul(%a, %b))
    }
    def @main(%x: Tensor[(4, 8), float32]) { @Block(%x, meta[Constant][0]) }

and the export writes ``@Block`` back as the ``FunctionProto`` ``my.lib::Block`` (its body
exported as a graph is: composites, constants as ``Constant`` nodes) and each call of it as
a ``my.lib.Block`` node.

The import expands a call's body as it always did, then *outlines* it: the nodes between
the call's inputs and its outputs become the function's body, with the inputs replaced by
parameters typed as the call's arguments are. Calls whose outlined bodies are structurally
equal share one function; a call whose arguments have other types (another shape, say)
or whose body the import specialised (a constant folded from a weight argument) gets a
function of its own, ``@Block_1``. Only the graph's own calls are outlined: a function
called inside another function's body is expanded into it. A call is left expanded where
outlining would change what it computes -- an optional input left out, an output that is
one of its inputs, a sequence argument -- and ``load(..., inline_functions=True)`` (the
CLI's ``--inline-functions``) expands every call, as onnxruntime's optimiser does first.
"""
from __future__ import annotations

from typing import Any, Optional

import onnx
from onnx import helper

from passhost import ir
from passhost.ir.rewrite import KEEP_TYPES, RuleTable, walk

__all__ = ["FunctionSite", "outline", "kept_function", "emit_function_call", "function_protos", "ATTR"]

#: the attribute of a global function that came from a model-local function: "domain::name"
ATTR = "onnx.function"


class Site:
    """One call of a local function in the graph, as imported: its node, the argument
    expressions and the expressions of its outputs."""

    __slots__ = ("node", "inputs", "outputs", "formals")

    def __init__(self, node: onnx.NodeProto, inputs: list, outputs: list, formals: list) -> None:
        self.node, self.inputs, self.outputs, self.formals = node, inputs, outputs, formals


class FunctionSite:
    """The importer-stack entry that follows a graph-level call's expanded body: once the
    body's nodes are converted, it records the call (:class:`Site`) in ``sites``."""

    __slots__ = ("node", "inputs", "formals", "sites")

    def __init__(self, node: onnx.NodeProto, inputs: list, function: onnx.FunctionProto, sites: list) -> None:
        self.node, self.inputs, self.formals, self.sites = node, inputs, list(function.input), sites

    def record(self, env: dict) -> None:
        outputs = [env.get(name) for name in self.node.output if name]
        self.sites.append(Site(self.node, self.inputs, outputs, self.formals))


def outline(sites: list, body: ir.Expr, taken: set) -> tuple:
    """``(body, [(GlobalVar, Function)])``: ``body`` with each outlined call's region
    replaced by a call of its function (see the module docs). ``taken``: global names in
    use (``main``)."""
    instances: dict = {}   # (domain, name) -> [(GlobalVar, Function)]
    kept: list = []
    calls: list = []       # (GlobalVar, argument expressions, number of outputs, the node's span)
    where: dict = {}       # an output expression -> (index into calls, output position)
    for site in sites:
        fn = _function_of(site)
        if fn is None or any(out in where for out in site.outputs):
            continue
        gv = _instance(fn, site.node, instances, kept, taken)
        for k, out in enumerate(site.outputs):
            where[out] = (len(calls), k)
        calls.append((gv, site.inputs, len(site.outputs), site.outputs[0].span))
    if not calls:
        return body, []
    memo: dict = {}
    made: list = [None] * len(calls)

    def replace(new: ir.Expr, old: ir.Expr) -> Optional[ir.Expr]:
        hit = where.get(old)
        if hit is None:
            return None
        i, k = hit
        if made[i] is None:
            gv, args, _, span = calls[i]
            made[i] = ir.set_span(ir.Call(gv, [memo.get(a, a) for a in args]), span)
        return made[i] if calls[i][2] == 1 else ir.TupleGetItem(made[i], k)

    roots = {type(out) for out in where}
    new_body = walk(body, RuleTable([(roots, replace)], with_original=True), memo=memo)
    return new_body, kept


def _function_of(site: Site) -> Optional[ir.Function]:
    """The outlined body of one call as a function, or ``None`` where outlining would
    change what the call computes."""
    if any(x is None for x in site.inputs) or any(x is None for x in site.outputs) or not site.outputs:
        return None
    if any(out is x for out in site.outputs for x in site.inputs):
        return None  # (an output that is an input: Identity-like, nothing to outline)
    params, memo = [], {}
    for formal, arg in zip(site.formals, site.inputs):
        ty = arg.checked_type
        if not isinstance(ty, ir.TensorType):
            return None
        p = ir.var(formal, ty)
        params.append(p)
        memo.setdefault(arg, p)
    out = site.outputs[0] if len(site.outputs) == 1 else ir.Tuple(list(site.outputs))
    body = walk(out, None, KEEP_TYPES, memo=memo)
    fn = ir.Function(params, body, attrs={ATTR: f"{site.node.domain}::{site.node.op_type}"})
    if ir.free_vars(fn):
        return None  # (it reads a value of the graph that is not an argument)
    return fn


def _instance(fn: ir.Function, node: onnx.NodeProto, instances: dict, kept: list, taken: set) -> ir.GlobalVar:
    """The global function equal to ``fn`` among those of the same local function, or a
    new one (``@Block``, ``@Block_1``, ...)."""
    same = instances.setdefault((node.domain, node.op_type), [])
    for gv, other in same:
        if ir.structural_equal(fn, other):
            return gv
    name, k = node.op_type, 0
    while name in taken:
        k += 1
        name = f"{node.op_type}_{k}"
    taken.add(name)
    gv = ir.GlobalVar(name)
    same.append((gv, fn))
    kept.append((gv, fn))
    return gv


# -- export -----------------------------------------------------------------------------------


def kept_function(fn: ir.Function) -> bool:
    """Whether ``fn`` is a local function the export writes back as one."""
    return ATTR in fn.attrs


def emit_function_call(em: Any, mod: ir.IRModule, gv: ir.GlobalVar, args: list) -> Any:
    """The node calling kept function ``gv`` (``domain.name``); its output name, or a tuple
    of them. The function is remembered in ``em.kept_functions`` for :func:`function_protos`;
    its domain is imported at the model's own version (the export writes that over the 1
    recorded here, as for every custom domain)."""
    fn = mod[gv]
    domain = fn.attrs[ATTR].partition("::")[0]
    em.kept_functions.setdefault(gv, fn)
    em.domains.setdefault(domain, 1)
    ret = fn.checked_type.ret_type
    n_out = len(ret.fields) if isinstance(ret, ir.TupleType) else 1
    outs = em.node(gv.name_hint, list(args), n_out, domain=domain)
    return tuple(outs) if isinstance(ret, ir.TupleType) else outs[0]


def function_protos(em: Any, export_parts: Any, full_tensor: Any) -> list:
    """The ``FunctionProto`` of each kept function the graph calls: its body exported as a
    graph at the graph's opset and target (``export_parts``), its initializers as
    ``Constant`` nodes (``full_tensor(name, array)``: the exporter's TensorProto)."""
    out = []
    for gv, fn in em.kept_functions.items():
        body = ir.Function(fn.params, fn.body, fn.ret_type)
        model, weights = export_parts(ir.IRModule.from_expr(body), opset=em.opset, target=em.target)
        consts = [helper.make_node("Constant", [], [name], value=full_tensor(name, arr))
                  for name, arr in weights]
        domain = fn.attrs[ATTR].partition("::")[0]
        out.append(helper.make_function(domain, gv.name_hint, [i.name for i in model.graph.input],
                                        [o.name for o in model.graph.output], consts + list(model.graph.node),
                                        list(model.opset_import)))
    return out
