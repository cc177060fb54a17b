"""ONNX functions, expanded at import: operators ONNX defines by a function body, and the
model's own local functions.

Many newer ONNX operators (``Attention`` and ``RotaryEmbedding`` of opset 23, the losses,
``CenterCropPad`` ...) come with a body of simpler operators in their schema, and exporters
can write a model's modules as local functions (``model.functions``). A node of either
kind that no converter knows, or whose converter leaves its form to the body
(:data:`~.table.USE_BODY`: ``Attention`` with a ``softcap``, say), is replaced by its body,
each body node converted as usual::

    Y = RotaryEmbedding(X, cos, sin)       # opset 23, no converter
    ->  RotaryEmbedding_0::XIn = Transpose(X) ... Y = Concat(...)   # its schema's body

Inside a body, names get a prefix unique to the expansion (``<op>_<k>::``), the body's
formal inputs and outputs become the node's own, and attributes that refer to the node's
(``ref_attr_name``) take the node's value, or the default the schema or the function
gives. A context-dependent body (one the schema builds for the node's input types) is
built from the types passhost inferred for those inputs. Bodies nest (a body node can be a
function again), to a depth of :data:`MAX_DEPTH`.
"""
from __future__ import annotations

from typing import Any, Optional

import onnx
from onnx import AttributeProto, FunctionProto, NodeProto

from passhost import ir
from passhost.errors import FormatError

from .control import SUBGRAPH_OPS, renamed
from .dtypes import to_onnx_type

__all__ = ["Functions", "MAX_DEPTH"]

#: how deep function bodies may nest (a local function that calls itself never ends)
MAX_DEPTH = 32

_STANDARD = ("", "ai.onnx")


class Functions:
    """The function bodies one model's nodes can expand into."""

    def __init__(self, model: onnx.ModelProto) -> None:
        self.local = {(f.domain, f.name): f for f in model.functions}
        self._schemas: dict = {}
        self._count = 0
        self._graph = model.graph
        self._names: Optional[set] = None

    @property
    def _taken(self) -> set:
        """The model's own tensor names: an expansion's prefix never produces one of them
        (collected on the first expansion; most models have none)."""
        if self._names is None:
            g = self._graph
            self._names = {vi.name for vi in g.input} | {t.name for t in g.initializer} | {
                o for n in g.node for o in n.output}
        return self._names

    def _schema(self, op_type: str, opset: int) -> Optional[Any]:
        key = (op_type, opset)
        if key not in self._schemas:
            try:
                schema = onnx.defs.get_schema(op_type, opset, "")
            except Exception:  # not an ONNX operator (at this opset)
                schema = None
            if schema is not None and not self._versions(schema, opset):
                schema = None
            self._schemas[key] = schema
        return self._schemas[key]

    @staticmethod
    def _versions(schema: Any, opset: int) -> list:
        """``[(version, context dependent)]`` of the schema's bodies usable at ``opset``."""
        return sorted([(v, False) for v in schema.function_opset_versions if v <= opset]
                      + [(v, True) for v in schema.context_dependent_function_opset_versions if v <= opset])

    def has_body(self, domain: str, op_type: str, opset: int) -> bool:
        """Whether a ``domain.op_type`` node has a body to expand into at ``opset``."""
        if (domain, op_type) in self.local:
            return True
        return domain in _STANDARD and self._schema(op_type, opset) is not None

    def expand(self, n: NodeProto, opset: int, input_types: list) -> Optional[tuple]:
        """``(body nodes, their opsets {domain: version})`` for node ``n``, renamed into the
        graph, or ``None`` when ``n`` has no body. ``input_types``: the passhost type of each
        input of ``n`` (``None`` for a missing optional one)."""
        local = self.local.get((n.domain, n.op_type))
        if local is not None:
            defaults = {a.name: a for a in local.attribute_proto}
            return self._rename(n, local, defaults), _opsets(local)
        if n.domain not in _STANDARD:
            return None
        schema = self._schema(n.op_type, opset)
        if schema is None:
            return None
        version, dependent = self._versions(schema, opset)[-1]
        defaults = {name: a.default_value for name, a in schema.attributes.items()
                    if a.default_value.type != AttributeProto.UNDEFINED}
        if dependent:
            full = NodeProto()
            full.CopyFrom(n)
            present = {a.name for a in n.attribute}
            full.attribute.extend(a for name, a in defaults.items() if name not in present)
            types = [_type_proto(t).SerializeToString() for t in input_types]
            data = schema.get_context_dependent_function_with_opset_version(version, full.SerializeToString(), types)
        else:
            data = schema.get_function_with_opset_version(version)
        body = FunctionProto()
        body.ParseFromString(data)
        if dependent and not body.node and n.output:
            shown = ", ".join(str(t) for t in input_types if t is not None)
            raise FormatError(f"{n.op_type} node {n.name or n.output[0]!r}: ONNX's schema builds its body from "
                              f"the input types and builds none for these ({shown}); a size it needs as a number "
                              "is dynamic: specialise the model with --input-shape or --bind-dim")
        return self._rename(n, body, defaults), _opsets(body)

    def prefix(self, op_type: str, internal: Any = ()) -> str:
        """A name prefix for one expansion, ``<op_type>_<k>::``, under which none of the
        ``internal`` names becomes one of the model's own."""
        while True:
            self._count += 1
            prefix = f"{op_type}_{self._count}::"
            if not any(prefix + x in self._taken for x in internal):
                return prefix

    def _rename(self, n: NodeProto, body: FunctionProto, defaults: dict) -> list:
        internal = {x for inner in body.node for x in (*inner.input, *inner.output)} - set(body.input) - set(body.output)
        prefix = self.prefix(n.op_type, internal)
        names = {}
        for i, formal in enumerate(body.input):
            names[formal] = n.input[i] if i < len(n.input) else ""
        for i, formal in enumerate(body.output):
            if i < len(n.output) and n.output[i]:
                names[formal] = n.output[i]
        attrs = {**defaults, **{a.name: a for a in n.attribute}}
        out = []
        for inner in body.node:
            node = NodeProto()
            node.op_type, node.domain = inner.op_type, inner.domain
            node.name = prefix + (inner.name or (inner.output[0] if inner.output else inner.op_type))
            node.input.extend(names.get(x, prefix + x) if x else "" for x in inner.input)
            node.output.extend(names.get(x, prefix + x) if x else "" for x in inner.output)
            for a in inner.attribute:
                if a.type == AttributeProto.GRAPH and inner.op_type in SUBGRAPH_OPS:  # it reads the body's names
                    new = node.attribute.add()
                    new.CopyFrom(a)
                    new.g.CopyFrom(renamed(a.g, {x: names.get(x, prefix + x) for x in internal | set(names)}))
                    continue
                if a.type in (AttributeProto.GRAPH, AttributeProto.GRAPHS):
                    raise FormatError(f"{n.op_type} node {n.name or n.output[0]!r}: its function body has a "
                                      f"subgraph ({inner.op_type}), which passhost does not import")
                if a.ref_attr_name:
                    given = attrs.get(a.ref_attr_name)
                    if given is None:
                        continue  # not given, no default: the body node's own default applies
                    new = node.attribute.add()
                    new.CopyFrom(given)
                    new.name = a.name
                else:
                    node.attribute.add().CopyFrom(a)
            out.append(node)
        return out


def _opsets(body: FunctionProto) -> dict:
    return {("" if imp.domain in _STANDARD else imp.domain): int(imp.version) for imp in body.opset_import}


def _type_proto(ty: Any) -> onnx.TypeProto:
    """The ONNX type of a passhost tensor type (an empty TypeProto for anything else)."""
    if isinstance(ty, ir.TensorType):
        dims = [d if type(d) is int else None if d is ir.ANY else str(d) for d in ty.shape]
        return onnx.helper.make_tensor_type_proto(to_onnx_type(ty.dtype), dims)
    return onnx.TypeProto()
