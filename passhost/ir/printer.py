"""The Relay text format: printing.

:func:`pretty_print` is what ``str(mod)`` and ``str(expr)`` return (no version header, no
metadata); :func:`astext` adds the ``#[version = "0.0.5"]`` header and, when constants
were referenced, either a ``#[metadata]`` section (so :func:`passhost.ir.parse` can read
the program back, constant data included) or TVM's "metadata section has been omitted"
comment. A typed module prints as::

    def @main(%x: Tensor[(1, 10), float32] /* ty=Tensor[(1, 10), float32] */) -> Tensor[(1, 10), float32] {
      %0 = add(%x, 1f /* ty=float32 */) /* ty=Tensor[(1, 10), float32] */;
      nn.relu(%0) /* ty=Tensor[(1, 10), float32] */
    }

Layout rules (TVM-NOTES §5):

* Variables, global variables, constants and operators are always printed inline. Every
  other expression gets a binding line ``%N = ...;`` and is referred to as ``%N``
  afterwards, except a scope's result expression (function body, branch, ``let`` body),
  which is printed inline when it has a single use. ``let`` values are printed inline
  when they have a single use as well. The binding goes in the innermost scope that
  encloses every use (:mod:`passhost.ir._scopes`): a value used inside a closure or a
  branch and outside it is bound outside, before the closure or the ``if``.
* Numbering (one counter per print call, shared by all functions): printing a call
  first visits its callee (a function literal's parameters are named then, its body
  printed as its own scope), then its operands in order; then the temporaries are
  allocated — for the not-yet-bound non-atomic operands in operand order, then for a
  non-atomic callee. Tuples, tuple projections and ``if`` conditions work the same way.
* ``/* ty=... */`` follows a node that has a checked type, once per node where it is
  bound (or printed inline as a scope result); inline constants repeat it at every
  occurrence; variable references, ``if`` and ``let`` never carry it.
* Rank-0 int16/int32/int64/float16/bfloat16/float32/float64/bool constants print as literals
  (``42i16``, ``42``, ``42i64``, ``3f16``, ``3bf16``, ``2f``, ``3f64``, ``True``); floats use C's
  ``%g``. **Deviation from TVM:** when ``%g`` would lose digits, the shortest exact form is
  printed instead (``0.1f`` but ``3.1415927f``), so printing and parsing is lossless.
  Every other constant prints as ``meta[relay.Constant][i]``.
* Variable names are made unique per print call (a second ``%p0`` is ``%p01``); names not
  starting with a letter get a ``v`` prefix and characters other than letters, digits and
  ``_`` become ``_`` (so every printed name can be parsed back).

Nothing here recurses per node: the printer runs an explicit stack of actions, so a
100,000-deep chain prints at the default recursion limit. Printing is linear in the size
of the module: a nested scope's text is kept as a rope (a list of pieces) that its
enclosing scopes hold by reference and that is joined once at the end, and indentation
stops growing at :data:`MAX_INDENT` levels, so ``let %v = { let %w = { ... } ... }``
nested 100,000 deep prints in time and space proportional to its input.
"""
from __future__ import annotations

import base64
import json
import math
import re
from typing import Any, Union

import numpy as np

from ..errors import IRError
from ._gc import gc_paused
from ._scopes import Scopes
from .rewrite.dataflow import count_uses_into
from ._type_size import MAX_TYPE_DEPTH, MAX_TYPE_PARTS, measure
from .dims import ANY, Dim
from .expr import Call, Constant, Expr, Function, GlobalVar, If, Let, Tuple, TupleGetItem, Var
from .module import IRModule
from .op import Op
from .types import TensorType, Type

__all__ = [
    "pretty_print",
    "astext",
    "format_float",
    "format_attr_value",
    "VERSION",
    "VERSION_HEADER",
    "METADATA_HEADER",
    "METADATA_OMITTED",
    "MAX_INDENT",
    "MAX_TYPE_DEPTH",
    "MAX_TYPE_PARTS",
]

VERSION = "0.0.5"
VERSION_HEADER = '#[version = "0.0.5"]'
METADATA_HEADER = "#[metadata]"
#: TVM's comment when ``astext(show_meta_data=False)`` (trailing spaces included)
METADATA_OMITTED = (
    "/* For debugging purposes the metadata section has been omitted.\n"
    " * If you would like to see the full metadata section you can set the \n"
    " * option to `True` when invoking `astext`. \n"
    " */"
)

#: nesting depth beyond which scopes are indented no further (keeps the text linear in
#: the program's size; the parser does not read indentation)
MAX_INDENT = 32

_FLOAT_TYPES = {"float16": np.float16, "float32": np.float32, "float64": np.float64,
                "bfloat16": np.dtype("bfloat16").type}
_FLOAT_SUFFIX = {"float16": "f16", "float32": "f", "float64": "f64", "bfloat16": "bf16"}
_INT_SUFFIX = {"int16": "i16", "int32": "", "int64": "i64"}
#: characters a printed variable name cannot hold: ``/`` between name characters and ``.``
#: before a letter can (exporters name tensors ``encoder/layer_0/query.weight``, and such
#: names round-trip); ``.`` before a digit would read as a tuple projection (``%x.0``)
_BAD_NAME_CHARS = re.compile(r"[^A-Za-z0-9_./]|\.(?![A-Za-z_])|/(?![A-Za-z0-9_])|(?<![A-Za-z0-9_])[./]")

# action codes of the printing machine
_VISIT, _POST, _RESULT, _LET_VALUE, _FN_END, _IF_COND, _IF_THEN, _IF_END, _PAREN_END, _TAIL = range(10)


def format_float(value: float, dtype: str = "float64") -> str:
    """Digits of a float as TVM prints them (C ``%g``), or the shortest exact form in
    ``dtype`` when ``%g`` would not read back as the same value. No suffix.

    >>> format_float(2.0), format_float(1e-05), format_float(0.1, "float32")
    ('2', '1e-05', '0.1')
    """
    v = float(value)
    if math.isnan(v):
        return "-nan" if math.copysign(1.0, v) < 0 else "nan"  # the sign bit survives a round trip
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    text = "%g" % v
    conv = _FLOAT_TYPES.get(dtype, np.float64)
    with np.errstate(all="ignore"):
        if conv(float(text)) == conv(v):
            return text
        if conv is np.float64:
            return repr(v)
        return str(conv(v))


def _same_value(a: Any, b: Any) -> bool:
    if type(a) is bool or type(b) is bool:
        return type(a) is type(b) and a == b
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(_same_value(x, y) for x, y in zip(a, b))
    if isinstance(a, tuple) or isinstance(b, tuple):
        return False
    try:
        return bool(a == b)
    except Exception:  # pragma: no cover - exotic values
        return False


def format_attr_value(value: Any) -> str:
    """One attribute value in the text format: ``1``, ``2e-05f``, ``True``, ``"NCHW"``,
    ``[1, 1]``, ``None``, ``{k=v}``."""
    if value is None:
        return "None"
    if value is True:
        return "True"
    if value is False:
        return "False"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return format_float(value) + "f"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(format_attr_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}={format_attr_value(v)}" for k, v in value.items()) + "}"
    if type(value) is Dim or value is ANY:  # a symbolic entry of a shape attribute
        return str(value)
    raise IRError(
        f"cannot print attribute value {value!r} of type {type(value).__name__}: attribute values "
        "must be None, bool, int, float, str or tuples of those"
    )


def _scalar_literal(arr: np.ndarray) -> Union[str, None]:
    """The literal text of a rank-0 constant, or ``None`` if it goes to the metadata."""
    if arr.ndim != 0:
        return None
    dt = arr.dtype.name
    if dt == "bool":
        return "True" if arr.item() else "False"
    suffix = _INT_SUFFIX.get(dt)
    if suffix is not None:
        return f"{arr.item()}{suffix}"
    suffix = _FLOAT_SUFFIX.get(dt)
    if suffix is not None:
        return format_float(arr.item(), dt) + suffix
    return None


def _metadata_json(constants: list) -> str:
    """The ``#[metadata]`` payload: JSON, one entry per constant (C-order little-endian
    bytes, base64). Never pickle."""
    rows = []
    for c in constants:
        arr = c.data
        le = arr.astype(arr.dtype.newbyteorder("<"), copy=False)
        rows.append(json.dumps({
            "dtype": arr.dtype.name,
            "shape": list(arr.shape),
            "data": base64.b64encode(np.ascontiguousarray(le).tobytes()).decode("ascii"),
        }))
    if not rows:
        return '{\n  "relay.Constant": []\n}'
    return '{\n  "relay.Constant": [\n    ' + ",\n    ".join(rows) + "\n  ]\n}"


def _join(rope: Any) -> str:
    """The text of a rope (explicit stack: ropes nest as deep as the program's scopes)."""
    if type(rope) is str:
        return rope
    out: list = []
    add = out.append
    stack = [rope]
    push = stack.append
    pop = stack.pop
    while stack:
        x = pop()
        if type(x) is str:
            add(x)
        else:
            for i in range(len(x) - 1, -1, -1):
                push(x[i])
    return "".join(out)


class _Printer:
    """State of one print call: temp counter, name table, memo, metadata."""

    def __init__(self, annotate: Any = None) -> None:
        self.annotate = annotate  # None, or node -> the text written after it
        self.counter = 0
        self.name_alloc: dict = {}
        self.varname: dict = {}      # Var -> "%name"
        self.memo: dict = {}         # bound node -> "%N"
        self.pending: dict = {}      # printed, not yet bound node -> text
        self.const_text: dict = {}   # Constant -> text (with its annotation)
        self.literals: dict = {}     # id(rank-0 array) -> its literal text, or None (metadata)
        self.meta: list = []         # Constants in metadata order
        self.ty_text: dict = {}      # id(type) -> " /* ty=... */"
        self.type_sizes: dict = {}   # id(type) -> (depth, parts), saturated
        self.attr_text: dict = {}    # id(attrs) -> ", k=v, ..."
        self.uses: dict = {}
        self.scopes: list = []       # the scopes being printed, innermost last
        self.places = Scopes()       # where each node is written (see _scopes.py)
        self.open: dict = {}         # scope id -> its record [lines, depth, result]
        self.base = 0                # indentation of the root scope being printed

    # -- helpers --------------------------------------------------------------
    def count_uses(self, root: Expr) -> bool:
        """Count, for every non-atomic node under ``root``, how many parent edges use it,
        into the table of this print call (the host's use analysis:
        :func:`passhost.ir.rewrite.count_uses_into`). Whether a scope (function, ``if``,
        ``let``) is met below ``root``."""
        return count_uses_into(self.uses, root)

    def annot(self, node: Expr) -> str:
        """`` /* ty=T */`` for a typed node (TVM never annotates ``if`` and ``let``), when
        ``T`` is small enough to write (:meth:`small`); with an ``annotate``
        function, what it returns for the node instead (TVM's ``astext(annotate=...)``)."""
        if self.annotate is not None:
            if type(node) is If or type(node) is Let:
                return ""
            return str(self.annotate(node) or "")
        t = node._checked_type
        if t is None or type(node) is If or type(node) is Let:
            return ""
        s = self.ty_text.get(id(t))
        if s is None:
            s = self.ty_text[id(t)] = f" /* ty={t} */" if self.small(t) else ""
        return s

    def small(self, t: Type) -> bool:
        """Whether the inferred type ``t`` is written out (see :data:`MAX_TYPE_DEPTH`)."""
        if type(t) is TensorType:
            return True
        got = self.type_sizes.get(id(t))
        if got is None:
            got = measure(t, self.type_sizes)
        return got[0] <= MAX_TYPE_DEPTH and got[1] <= MAX_TYPE_PARTS

    def unique_name(self, prefix: str) -> str:
        table = self.name_alloc
        n = table.get(prefix)
        name = prefix
        if n is not None:
            while True:
                n += 1
                candidate = f"{prefix}{n}"
                if candidate not in table:
                    table[prefix] = n
                    name = candidate
                    break
        table[name] = 0
        return name

    def var_def(self, var: Var, inferred: bool = False) -> str:
        """Allocate a unique name for ``var``; return its definition text. ``inferred``:
        ``var`` is bound by a ``let``, so inference gives a typed one its annotation back
        from the value; a large one is not written out then."""
        hint = _BAD_NAME_CHARS.sub("_", var.name_hint)
        if not hint or not ("a" <= hint[0] <= "z" or "A" <= hint[0] <= "Z"):
            hint = "v" + hint
        name = "%" + self.unique_name(hint)
        self.varname[var] = name
        ann = var.type_annotation
        if ann is not None and not (inferred and var._checked_type is not None and not self.small(ann)):
            name = f"{name}: {ann}"
        return name + self.annot(var)

    def constant(self, c: Constant) -> str:
        s = self.const_text.get(c)
        if s is None:
            data = c.data
            if data.ndim == 0:  # parsed literals of one spelling share their array: format it once
                s = self.literals.get(id(data), _UNSEEN)
                if s is _UNSEEN:
                    s = self.literals[id(data)] = _scalar_literal(data)
            else:
                s = None
            if s is None:
                s = f"meta[relay.Constant][{len(self.meta)}]"
                self.meta.append(c)
            s = self.const_text[c] = s + self.annot(c)
        return s

    def call_attrs(self, call: Call) -> str:
        attrs = call.attrs
        if not attrs:
            return ""
        key = id(attrs)
        s = self.attr_text.get(key)
        if s is None:
            op = call.op
            parts = []
            if type(op) is Op:
                defaults = op.attr_defaults
                if attrs is not defaults:
                    for k, v in attrs.items():
                        if k not in defaults or not _same_value(v, defaults[k]):
                            parts.append(f"{k}={format_attr_value(v)}")
            else:
                parts = [f"{k}={format_attr_value(v)}" for k, v in attrs.items()]
            s = self.attr_text[key] = "".join(", " + p for p in parts)
        return s

    def atom(self, node: Expr) -> Union[str, None]:
        t = type(node)
        if t is Var:
            name = self.varname.get(node)
            if name is None:
                # a free variable: declare it at the top of the printed scope
                self.scopes[0][0].append(f"free_var {self.var_def(node)};")
                name = self.varname[node]
            return name
        if t is Constant:
            return self.constant(node)
        if t is Op:
            return node.name
        if t is GlobalVar:
            return "@" + node.name_hint
        return None

    def ref(self, node: Expr) -> str:
        """Text referring to ``node`` from an operand position (binds it if needed)."""
        s = self.memo.get(node)
        if s is not None:
            return s
        s = self.atom(node)
        if s is not None:
            return s
        name = f"%{self.counter}"
        self.counter += 1
        text = self.pending.pop(node)
        # the innermost scope of all its uses (the current one in a module without scopes,
        # or for a node shared with an earlier function)
        scope = self.open.get(self.places.home.get(node))
        lines = (self.scopes[-1] if scope is None else scope)[0]
        if type(text) is str:
            lines.append(f"{name} = {text}{self.annot(node)};")
        else:
            lines.append([name, " = ", text, self.annot(node), ";"])
        self.memo[node] = name
        return name

    def inline_if_unique(self, node: Expr) -> str:
        s = self.memo.get(node)
        if s is not None:
            return s
        s = self.atom(node)
        if s is not None:
            return s
        if self.uses.get(node, 0) <= 1:
            text = self.pending.pop(node)
            if type(text) is str:
                return text + self.annot(node)
            return [text, self.annot(node)]
        return self.ref(node)

    def fn_head(self, keyword: str, fn: Function, params: list) -> str:
        parts = params + [f"{k}={format_attr_value(v)}" for k, v in fn.attrs.items()]
        head = f"{keyword}(" + ", ".join(parts) + ")"
        ret = fn.ret_type
        if ret is not None and (fn._checked_type is None or self.small(ret)):  # (inference gives it back)
            head += f" -> {ret}"
        return head + " {"

    @staticmethod
    def close(scope: list, closer: str = "}") -> Union[str, list]:
        """The text of a finished scope (its lines, one per row, then ``closer``): a
        string, or a rope when a line holds a nested scope's rope."""
        lines, depth, result = scope
        depth = min(depth, MAX_INDENT)
        ind = "\n" + "  " * depth
        lines.append(result)
        tail = "\n" + "  " * (depth - 1) + closer
        try:
            return ind + ind.join(lines) + tail   # no nested scope inside: one string
        except TypeError:
            pass
        rope: list = []
        add = rope.append
        for line in lines:
            add(ind)
            add(line)
        add(tail)
        return rope

    def enter(self, scope: int) -> None:
        """Start printing scope ``scope`` (a function body, a branch, a ``let``)."""
        record = self.open[scope] = [[], self.base + self.places.depth[scope], None]
        self.scopes.append(record)

    def leave(self, scope: int) -> list:
        """Finish scope ``scope``: nothing is bound in it any more (a node placed there but
        first needed later, which only a malformed graph has, is bound where it is needed)."""
        del self.open[scope]
        return self.scopes.pop()

    # -- the machine ------------------------------------------------------------
    # hot loop: one step per node printed (the explicit-stack machine); each kind of node in line
    def scope(self, root: Expr, depth: int, scoped: bool = True) -> list:
        """Print ``root`` as the result of a new scope at ``depth``; return the scope
        ``[lines, depth, result]``. ``scoped``: whether ``root`` holds nested scopes
        (without, every node is written in this one and need not be placed)."""
        scopes = self.scopes
        self.base = depth
        self.open.clear()
        places = self.places
        self.enter(places.place(root, self.uses, self.memo) if scoped else places.new(-1))
        inner = self.places.inner
        memo = self.memo
        pending = self.pending
        varname = self.varname
        stack: list = [(_TAIL, root)]
        push = stack.append
        pop = stack.pop
        ref = self.ref
        atomic = _ATOMIC
        while stack:
            item = pop()
            code = item[0]
            node = item[1]
            if code == _VISIT:
                if node in pending or node in memo:
                    continue
                t = type(node)
                if t is Call:
                    push((_POST, node))
                    args = node.args
                    for i in range(len(args) - 1, -1, -1):
                        a = args[i]
                        ta = type(a)
                        if ta not in atomic or (ta is Var and a not in varname):
                            push((_VISIT, a))
                    op = node.op
                    if type(op) is not Op:
                        push((_VISIT, op))
                elif t is Var:
                    self.atom(node)
                elif t is Function:
                    params = [self.var_def(p) for p in node.params]
                    self.enter(inner[node])
                    push((_FN_END, node, params))
                    push((_TAIL, node.body))
                elif t is Tuple:
                    push((_POST, node))
                    fields = node.fields
                    for i in range(len(fields) - 1, -1, -1):
                        push((_VISIT, fields[i]))
                elif t is TupleGetItem:
                    push((_POST, node))
                    push((_VISIT, node.tuple_value))
                elif t is If:
                    push((_IF_COND, node))
                    push((_VISIT, node.cond))
                elif t is Let:
                    # a let in operand position: its own parenthesised scope
                    self.enter(inner[node])
                    push((_PAREN_END, node))
                    push((_LET_VALUE, node, self.var_def(node.var, True)))
                    push((_VISIT, node.value))
                # Constant, Op, GlobalVar: nothing to do
            elif code == _POST:
                t = type(node)
                if t is Call:
                    args = ", ".join([ref(a) for a in node.args])
                    callee = ref(node.op)
                    attrs = self.call_attrs(node)
                    if attrs and not args:  # a call without arguments: zeros(shape=[2], ...)
                        attrs = attrs[2:]
                    pending[node] = f"{callee}({args}{attrs})"
                elif t is Tuple:
                    fields = [ref(f) for f in node.fields]
                    if len(fields) == 1:
                        pending[node] = f"({fields[0]},)"
                    else:
                        pending[node] = "(" + ", ".join(fields) + ")"
                else:  # TupleGetItem
                    pending[node] = f"{ref(node.tuple_value)}.{node.index}"
            elif code == _TAIL:
                if type(node) is Let and node not in memo and node not in pending and node not in inner:
                    push((_LET_VALUE, node, self.var_def(node.var, True)))
                    push((_VISIT, node.value))
                else:
                    push((_RESULT, node))
                    push((_VISIT, node))
            elif code == _RESULT:
                scopes[-1][2] = self.inline_if_unique(node)
            elif code == _LET_VALUE:
                value = self.inline_if_unique(node.value)
                scopes[-1][0].append(f"let {item[2]} = {value};" if type(value) is str
                                     else ["let ", item[2], " = ", value, ";"])
                push((_TAIL, node.body))
            elif code == _FN_END:
                body = self.close(self.leave(inner[node]))
                pending[node] = [self.fn_head("fn ", node, item[2]), body]
            elif code == _IF_COND:
                cond = ref(node.cond)
                self.enter(inner[node][0])
                push((_IF_THEN, node, cond))
                push((_TAIL, node.true_branch))
            elif code == _IF_THEN:
                then = self.close(self.leave(inner[node][0]))
                self.enter(inner[node][1])
                push((_IF_END, node, [f"if ({item[2]}) {{", then, " else {"]))
                push((_TAIL, node.false_branch))
            elif code == _IF_END:
                pending[node] = [item[2], self.close(self.leave(inner[node][1]))]
            elif code == _PAREN_END:
                pending[node] = ["(", self.close(self.leave(inner[node]), ")")]
        return scopes.pop()

    # -- entry points ------------------------------------------------------------
    def print_module(self, mod: IRModule) -> str:
        items = []
        for gv in mod.get_global_vars():
            fn = mod[gv]
            scoped = self.count_uses(fn)
            params = [self.var_def(p) for p in fn.params]
            head = self.fn_head(f"def @{gv.name_hint}", fn, params)
            items.append(head + _join(self.close(self.scope(fn.body, 1, scoped))))
        if not items:
            return ""
        return "\n\n".join(items) + "\n"

    def print_expr(self, expr: Expr) -> str:
        scoped = self.count_uses(expr)
        lines, _, result = self.scope(expr, 0, scoped or type(expr) in _SCOPING)
        lines.append(result)
        return "\n".join([_join(line) for line in lines])


_ATOMIC = frozenset([Var, Constant, Op, GlobalVar])
_SCOPING = frozenset([Function, If, Let])


_UNSEEN = object()


def _print(obj: Any, annotate: Any = None) -> tuple:
    if annotate is not None and not callable(annotate):
        raise IRError(f"astext: annotate must be a function of an expression returning text, got {annotate!r}")
    p = _Printer(annotate)
    if isinstance(obj, IRModule):
        text = p.print_module(obj)
    elif isinstance(obj, Expr):
        text = p.print_expr(obj)
    elif isinstance(obj, Type):
        text = str(obj)
    else:
        raise IRError(f"cannot print a {type(obj).__name__}: pass an IRModule, an expression or a type")
    return text, p.meta


def printed_names(obj: Union[IRModule, Expr]) -> dict:
    """``{node: "%N"}`` for every node the text of ``obj`` binds to a number, so a tool can
    name a node as the printed module does (``passhost explain --at %7``)."""
    p = _Printer()
    if isinstance(obj, IRModule):
        p.print_module(obj)
    else:
        p.print_expr(obj)
    return dict(p.memo)


@gc_paused
def pretty_print(obj: Union[IRModule, Expr]) -> str:
    """The text of a module or expression as ``str()`` shows it: no version header and
    no metadata (non-scalar constants appear as ``meta[relay.Constant][i]``)."""
    text, meta = _print(obj)
    return text + "\n" if meta else text


@gc_paused
def astext(obj: Union[IRModule, Expr], show_meta_data: bool = True, annotate: Any = None) -> str:
    """The text format with the ``#[version = "0.0.5"]`` header.

    :param show_meta_data: when constants are referenced, append the ``#[metadata]``
        section holding their data (JSON; what :func:`passhost.ir.parse` reads back);
        when false, append TVM's "metadata section has been omitted" comment instead
    :param annotate: as TVM's: a function of an expression whose result is written after
        it, in place of the ``/* ty=... */`` comment (so it should return a comment, or
        ``""`` for nothing)::

            mod.astext(annotate=lambda e: f" /* {e.checked_type.dtype} */" if isinstance(e, ir.Call) else "")
    """
    text, meta = _print(obj, annotate)
    out = VERSION_HEADER + "\n" + text
    if meta:
        out += "\n"
        out += (METADATA_HEADER + "\n" + _metadata_json(meta)) if show_meta_data else METADATA_OMITTED
    return out
