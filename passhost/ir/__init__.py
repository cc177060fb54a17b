"""passhost.ir — a Relay-style functional tensor IR.

Public names (CONTRACT §2). Everything else in this package is private.
"""
from __future__ import annotations

from ..errors import IRError, ParseError, TypeInferenceError, WellFormedError, EvaluationError
from .types import Type, TensorType, TupleType, FuncType
from .expr import Attrs, Expr, Var, Constant, Call, Function, Tuple, TupleGetItem, Let, If, GlobalVar
from .op import Op, OpDef, OpPattern, register_op, list_ops
from .module import IRModule
from .visitor import (
    ExprVisitor,
    ExprMutator,
    ExprFunctor,
    children,
    post_order,
    post_order_visit,
    rewrite_post_order,
    with_children,
)
from .analysis import free_vars, bound_vars, count_ops

# --- modules still being written land below (temporary guard, removed at integration) ---
try:
    from . import ops as _ops  # noqa: F401  (registers the core operators)
    from .builders import *  # noqa: F401,F403
    from .builders import __all__ as _builders_all
    from . import nn
except ImportError:  # pragma: no cover
    _builders_all = []
try:
    from .structural import structural_equal, structural_hash
except ImportError:  # pragma: no cover
    pass
try:
    from .printer import pretty_print, astext
except ImportError:  # pragma: no cover
    pass
try:
    from .parser import parse, parse_expr
except ImportError:  # pragma: no cover
    pass
try:
    from .type_infer import infer_type
except ImportError:  # pragma: no cover
    pass
try:
    from .interpreter import evaluate
except ImportError:  # pragma: no cover
    pass
try:
    from .well_formed import well_formed
except ImportError:  # pragma: no cover
    pass
try:
    from .params import bind_params_by_name
except ImportError:  # pragma: no cover
    pass
