"""passhost.ir — a Relay-style functional tensor IR.

Public names (CONTRACT §2): types, expression nodes, the operator registry and one
builder per operator (``ir.add``, ``ir.nn.conv2d``, ...), ``IRModule``, visitors,
structural comparison, the text format, type inference, the reference interpreter
and the verifier. Everything else in this package is private. See ``docs/ir.md``.
"""
from __future__ import annotations

from ..errors import EvaluationError, IRError, ParseError, TypeInferenceError, WellFormedError
from .types import DTYPES, FuncType, IncompleteType, TensorType, TupleType, Type
from .expr import (Attrs, Call, Constant, Expr, Function, GlobalVar, If, Let, Tuple, TupleGetItem, Var, set_checked_type,
                   set_span, type_of)
from .span import Span
from .op import Op, OpDef, OpPattern, list_ops, register_op
from .module import IRModule
from .visitor import (
    ExprFunctor,
    ExprMutator,
    ExprVisitor,
    children,
    keep_checked_type,
    post_order,
    post_order_visit,
    with_children,
)
from .rewrite import rewrite_post_order
from .axes import expand_bias_to_match_axis
from .analysis import bound_vars, calls_any, contains_any, count_ops, free_vars, is_primitive, module_changed
from . import ops as _ops  # noqa: F401  (registers the core operators)
from .builders import *  # noqa: F401,F403
from .builders import __all__ as _builders_all
from . import image, nn, pattern, rewrite, vision
from .structural import assert_structural_equal, structural_equal, structural_hash
from .printer import astext, pretty_print, printed_names
from .parser import fromtext, parse, parse_expr
from .type_infer import infer_type
from .interpreter import evaluate
from .symbolic import fold_symbolic, symbolic_value
from .dims import ANY, Dim, broadcast_dim, size_var
from .well_formed import well_formed, well_formed_function
from .params import bind_params_by_name
from .serialize import load, save
from ._gc import paused as paused_gc
from .ops._util import quiet_kernels
from .ops.layout import layout_axes, parse_layout
from .ops.volume import pad6

__all__ = [
    # errors
    "IRError", "ParseError", "TypeInferenceError", "WellFormedError", "EvaluationError",
    # types
    "Type", "TensorType", "TupleType", "FuncType", "IncompleteType", "DTYPES",
    # nodes
    "Attrs", "Expr", "Var", "Constant", "Call", "Function", "Tuple", "TupleGetItem", "Let", "If", "Span", "set_span", "type_of", "set_checked_type",
    "GlobalVar", "Op", "OpDef", "OpPattern", "register_op", "list_ops",
    # module
    "IRModule",
    # traversal and analysis
    "ExprFunctor", "ExprVisitor", "ExprMutator", "children", "keep_checked_type", "post_order", "post_order_visit",
    "rewrite_post_order", "with_children", "expand_bias_to_match_axis", "free_vars", "bound_vars", "count_ops", "calls_any", "contains_any", "is_primitive", "module_changed",
    # structure, text, types, evaluation
    "structural_equal", "structural_hash", "assert_structural_equal",
    "pretty_print", "printed_names", "astext", "parse", "parse_expr", "fromtext",
    "infer_type", "evaluate", "fold_symbolic", "symbolic_value", "Dim", "ANY", "size_var", "broadcast_dim", "well_formed", "well_formed_function", "bind_params_by_name", "load", "save", "paused_gc", "quiet_kernels",
    # layouts and padding, as operator attributes spell them
    "parse_layout", "layout_axes", "pad6",
    # operators
    "nn", "image", "vision", *_builders_all,
]
