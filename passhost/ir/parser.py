"""The Relay text format: parsing.

:func:`parse` reads a module — what :func:`passhost.ir.astext` prints::

    #[version = "0.0.5"]
    def @main(%x: Tensor[(1, 10), float32]) -> Tensor[(1, 10), float32] {
      %0 = add(%x, 1f);
      nn.relu(%0)
    }

and :func:`parse_expr` a single expression. Accepted: ``def @f(params, Attr=v) -> T
{ body }``; graph bindings ``%N = expr;`` (later ``%N`` is the very same node, so DAGs
keep their sharing); ``let %x: T = v; body``; ``fn (...) -> T { ... }``; ``if (c) {..}
else {..}``; tuples ``(a, b)``, ``(a,)``, ``()``; projections ``%3.0``; calls with
attributes ``nn.conv2d(%x, %w, padding=[1, 1])`` (checked against the operator's
declaration); binary ``+ - * /`` (``add`` …); literals ``1f``, ``1.5f``, ``1e-05f``,
``3f16``, ``3f64``, ``42``, ``42i16``, ``42i64``, ``True``; ``meta[relay.Constant][i]``
resolved from the ``#[metadata]`` section; ``free_var %x: T;``; types
``Tensor[(1, 2), float32]``, ``float32``, ``(T1, T2)``, ``fn (T1) -> T2``. Comments
(``//``, nested ``/* */``) are skipped, so ``/* ty=... */`` annotations are ignored.

Errors are :class:`~passhost.errors.ParseError` rendered as
``name:line:col: error: message``, the source line and a caret. The parser keeps its own
stack (nested constructs are generators driven by one loop), so a 100,000-deep
``add(add(...))`` parses at the default recursion limit.
"""
from __future__ import annotations

import re
from typing import Any, Optional

import numpy as np

from ..errors import IRError, ParseError, PasshostError, SourceTypeError, TypeInferenceError
from ._gc import gc_paused
from ._lexer import _END, _KEYWORDS, Source, TokenReader, tokenize
from .expr import Call, Constant, Expr, Function, GlobalVar, If, Let, Tuple, TupleGetItem, Var
from .module import IRModule
from .op import Op

__all__ = ["parse", "parse_expr", "fromtext"]

_VERSION_RE = re.compile(r'#\[version\s*=\s*"([^"]*)"\]')
_OPS = Op._registry   # name -> Op (read-only use)
_METADATA_RE = re.compile(r"^[ \t]*#\[metadata\][ \t\r]*$", re.M)
_BINOPS = {
    "*": (12, "multiply"), "/": (12, "divide"),
    "+": (10, "add"), "-": (10, "subtract"),
    "<": (8, "less"), "<=": (8, "less_equal"), ">": (8, "greater"), ">=": (8, "greater_equal"),
    "==": (7, "equal"), "!=": (7, "not_equal"),
}


def _version_hint() -> str:
    return 'you can annotate it as #[version = "0.0.5"]'


class _Parser(TokenReader):
    """The grammar: expressions, functions, definitions (token-level readers are
    inherited from :class:`~passhost.ir._lexer.TokenReader`)."""

    def __init__(self, text: str, source_name: str, context: Optional["_Context"] = None) -> None:
        if not isinstance(text, str):
            raise ParseError(f"parse needs the program text as a str, got {type(text).__name__}")
        self.context = context
        at = text.rfind("#[metadata]")
        m = _METADATA_RE.search(text, max(at - 100, 0)) if at >= 0 else None
        self.meta_text: Optional[str] = None
        self.meta_line = 0
        if m is not None:
            self.meta_text = text[m.end():]
            self.meta_line = text.count("\n", 0, m.start()) + 1
            text = text[:m.start()]
        self.src = Source(text, source_name)
        self.toks = tokenize(self.src)
        # two end markers: look-ahead of one token past the end (``toks[i + 1]``)
        # then reads the end marker instead of failing with IndexError
        self.toks.append(_END)
        self.toks.append(_END)
        self.i = 0
        self.scope: dict = {}        # name -> [Var, ...] (innermost last)
        self.graph: dict = {}        # "%N" -> Expr
        self.globals: dict = {}      # name -> GlobalVar
        self.module_mode = False
        self._meta: Optional[list] = None
        self._literals: dict = {}
        #: node -> token index where its text starts; filled only when a second parse is
        #: run to locate a type error (see :func:`parse`), so the common parse pays nothing
        self.spans: Optional[dict] = None
        if context is not None and self.meta_text is None and context.meta is not None:
            self._meta = context.meta  # init_meta_table: what meta[relay.Constant][i] refers to

    # -- variables ----------------------------------------------------------------------
    def bind(self, var: Var, name: str) -> None:
        self.scope.setdefault(name, []).append(var)

    def unbind(self, name: str) -> None:
        stack = self.scope[name]
        stack.pop()
        if not stack:
            del self.scope[name]

    def local(self, tok: str, index: int) -> Expr:
        if tok[1:2].isdigit():
            node = self.graph.get(tok)
            if node is None:
                raise self.error(f"{tok} is used before it is defined (define it with `{tok} = ...;`)", index)
            return node
        stack = self.scope.get(tok[1:])
        if not stack:
            raise self.error(
                f"unbound variable {tok}: bind it as a function parameter or with let, "
                f"or declare it with `free_var {tok}: <type>;`",
                index,
            )
        return stack[-1]

    def var_decl(self):
        """``%name [: type]`` -> (name, Var)."""
        tok = self.toks[self.i]
        if tok[:1] != "%" or tok[1:2].isdigit() or len(tok) < 2:
            raise self.error(f"expected a variable name like %x, found {self.describe(self.i)}")
        self.i += 1
        ann = None
        if self.toks[self.i] == ":":
            self.i += 1
            if self.toks[self.i] == "_":  # `_`: the type is left to inference, as TVM reads it
                self.i += 1
            else:
                ann = yield self.p_type()
        return tok[1:], Var(tok[1:], ann)

    # -- expressions ---------------------------------------------------------------------
    def simple_atom(self) -> Optional[Expr]:
        """Parse an atom that needs no nested parsing; ``None`` if the next atom does."""
        toks = self.toks
        i = self.i
        tok = toks[i]
        c = tok[:1]
        if c == "%":
            self.i = i + 1
            return self.local(tok, i)
        if c.isdigit() or (c == "-" and len(tok) > 1 and tok != "->") or tok[:3] in ("inf", "nan"):
            self.i = i + 1
            return self.number(tok, i)
        if c == "@":
            if len(tok) < 2:
                raise self.error("expected a global function name after `@`, like @main", i)
            self.i = i + 1
            gv = self.globals.get(tok[1:])
            if gv is None:
                if self.module_mode:
                    raise self.error(f"undefined global function {tok}: define it with `def {tok}(...) {{ ... }}`", i)
                gv = self.globals[tok[1:]] = GlobalVar(tok[1:])
            return gv
        if tok == "True" or tok == "False":
            self.i = i + 1
            return Constant(np.array(tok == "True"))
        if tok == "meta":
            if toks[i + 1] != "[" or toks[i + 3] != "]" or toks[i + 4] != "[" or toks[i + 6] != "]":
                raise self.error("expected meta[relay.Constant][<index>]", i)
            key, idx = toks[i + 2], toks[i + 5]
            if key != "relay.Constant":
                raise self.error(f"unsupported metadata kind `{key}`: only relay.Constant is supported", i + 2)
            if not idx.isdigit():
                raise self.error(f"expected a metadata index, found `{idx}`", i + 5)
            table = self.meta_table(i)
            k = int(idx)
            if k >= len(table):
                raise self.error(
                    f"meta[relay.Constant][{k}] is out of range: the #[metadata] section has {len(table)} constants",
                    i,
                )
            self.i = i + 7
            return table[k]
        if c.isalpha() or c == "_":
            if tok in _KEYWORDS:
                return None
            self.i = i + 1
            try:
                return Op.get(tok)
            except IRError as e:
                raise self.error(str(e), i) from None
        return None

    def p_atom(self):
        """Atoms with nested structure: fn, if, parentheses, blocks."""
        toks = self.toks
        start = self.i
        tok = toks[start]
        if tok == "fn":
            self.i += 1
            return (yield self.p_fn_rest(None))
        if tok == "if":
            self.i += 1
            self.expect("(")
            cond = yield self.p_seq()
            self.expect(")")
            self.expect("{")
            then = yield self.p_seq()
            self.expect("}")
            self.expect("else")
            self.expect("{")
            other = yield self.p_seq()
            self.expect("}")
            node = If(cond, then, other)
            if self.spans is not None:
                self.spans[node] = start
            return node
        if tok == "(":
            self.i += 1
            if toks[self.i] == ")":
                self.i += 1
                return Tuple([])
            first = yield self.p_seq()
            if toks[self.i] == ")":
                self.i += 1
                return first
            fields = [first]
            while toks[self.i] == ",":
                self.i += 1
                if toks[self.i] == ")":
                    break
                fields.append((yield self.p_seq()))
            self.expect(")")
            node = Tuple(fields)
            if self.spans is not None:
                self.spans[node] = start
            return node
        if tok == "{":
            self.i += 1
            body = yield self.p_seq()
            self.expect("}")
            return body
        if tok == "-":  # unary minus on an expression (`-10` alone is a literal): negative(...)
            literal = self.signed_literal()
            if literal is not None:
                return literal
            self.i += 1
            operand = self.simple_atom()
            if operand is None:
                operand = yield self.p_atom()
            from .builders import negative

            try:
                node = negative(operand)
            except IRError as e:
                raise self.error(str(e), start) from None
            if self.spans is not None:
                self.spans[node] = start
            return node
        if tok in ("match", "ref", "ref_read", "ref_write", "type", "extern"):
            raise self.error(f"`{tok}` (algebraic data types and references) is not supported by passhost", start)
        raise self.error(f"expected an expression, found {self.describe(start)}", start)

    def signed_literal(self) -> Optional[Constant]:
        """Minus signs straight before a numeric literal are part of it, as TVM's tokenizer
        reads them: ``--10`` is the constant ``10``, ``---10`` the constant ``-10`` (not
        ``negative`` calls); ``None`` (nothing read) when no literal follows."""
        toks = self.toks
        j = self.i
        while toks[j] == "-":
            j += 1
        tok = toks[j]
        if not (tok[:1].isdigit() or (tok[:1] == "-" and len(tok) > 1 and tok != "->") or tok[:3] in ("inf", "nan")):
            return None
        negative = (j - self.i + (tok[:1] == "-")) % 2 == 1
        self.i = j + 1
        return self.number(("-" if negative else "") + tok.lstrip("-"), j)

    def p_fn_rest(self, name: Optional[str]):
        """``(params, attrs) [-> T] { body }`` after ``fn`` / ``def @name``."""
        toks = self.toks
        start = self.i - 1
        self.expect("(")
        params: list = []
        names: list = []
        attrs: dict = {}
        while toks[self.i] != ")":
            if self.is_attr_start():
                attrs = self.attrs(")")
                break
            pname, var = yield self.var_decl()
            params.append(var)
            names.append(pname)
            if toks[self.i] == ",":
                self.i += 1
            elif toks[self.i] != ")":
                raise self.error(f"expected `,` or `)` after a parameter, found {self.describe(self.i)}")
        self.i += 1
        ret = None
        if toks[self.i] == "->":
            self.i += 1
            ret = yield self.p_type()
        self.expect("{")
        for pname, var in zip(names, params):
            self.bind(var, pname)
        body = yield self.p_seq()
        for pname in names:
            self.unbind(pname)
        self.expect("}")
        fn = Function(params, body, ret, attrs or None)
        if self.spans is not None:
            self.spans[fn] = start
        return fn

    def arg_fast(self) -> Optional[Expr]:
        """An argument that is a single atom followed by `,` or `)` (the common case)."""
        toks = self.toks
        nxt = toks[self.i + 1]
        if nxt == "," or nxt == ")":
            c = toks[self.i][:1]
            if c == "%" or c.isdigit():
                return self.simple_atom()
        return None

    # hot loop: one step per token of the common forms (calls, variables, literals), in line
    def fast_expr(self) -> Optional[Expr]:
        """The common shapes ``atom``, ``atom(atoms..., attrs)`` and ``atom.N`` parsed
        without nested parsers; ``None`` (nothing consumed) for anything else.

        The hot loop of a parse: it keeps the position in a local and inlines the
        common arguments (``%N`` / ``%x`` and already-seen numeric literals)."""
        toks = self.toks
        start = i = self.i
        node = _OPS.get(toks[start])     # operator names are never shadowed
        if node is not None:
            i += 1
        else:
            node = self.simple_atom()
            if node is None:
                return None
            i = self.i
        tok = toks[i]
        if tok == "(":
            i += 1
            args: list = []
            attrs = None
            graph = self.graph
            literals = self._literals
            t = toks[i]
            while t != ")":
                n = toks[i + 1]
                if n == "," or n == ")":
                    c = t[:1]
                    if c == "%":
                        arg = graph.get(t)
                        if arg is None:
                            arg = self.local(t, i)
                        i += 1
                    else:
                        arr = literals.get(t)
                        if arr is not None:
                            arg = Constant(arr)
                            i += 1
                        else:
                            self.i = i
                            arg = self.simple_atom()
                            if arg is None:
                                self.i = start
                                return None
                            i = self.i
                    args.append(arg)
                else:
                    self.i = i
                    if n == "=" and self.is_attr_start():
                        attrs = self.attrs(")")
                        i = self.i
                        break
                    arg = self.simple_atom()
                    if arg is None or toks[self.i] not in (",", ")"):
                        self.i = start
                        return None
                    i = self.i
                    args.append(arg)
                t = toks[i]
                if t == ",":
                    i += 1
                    t = toks[i]
            i += 1
            if toks[i] == "(":
                self.i = start
                return None
            try:
                node = Call(node, args, attrs)
            except IRError as e:
                self.i = i
                raise self.error(str(e), start) from None
            if self.spans is not None:
                self.spans[node] = start
            tok = toks[i]
        while tok == ".":
            idx = toks[i + 1]
            if not idx.isdigit():
                self.i = start
                return None
            if len(idx) > 18:
                self.i = i + 1
                raise self.error(f"tuple index {idx[:12]}... ({len(idx)} digits) is too large", i + 1)
            node = TupleGetItem(node, int(idx))
            if self.spans is not None:
                self.spans[node] = start
            i += 2
            tok = toks[i]
        if tok == "(" or tok in _BINOPS:
            self.i = start
            return None
        self.i = i
        return node

    def p_binop(self):
        """Operands joined by binary operators, each operand an atom with calls and
        projections applied."""
        toks = self.toks
        operands: list = []
        operators: list = []
        while True:
            start = self.i
            node = self.simple_atom()
            if node is None:
                node = yield self.p_atom()
            # postfix: calls and projections
            while True:
                tok = toks[self.i]
                if tok == "(":
                    node = yield self.p_call(node, start)
                elif tok == ".":
                    self.i += 1
                    idx = toks[self.i]
                    parts = idx.split(".")
                    if not all(p.isdigit() for p in parts):
                        raise self.error(f"expected a tuple index after `.`, found {self.describe(self.i)}")
                    self.i += 1
                    for p in parts:
                        if len(p) > 18:
                            raise self.error(f"tuple index {p[:12]}... ({len(p)} digits) is too large", self.i - 1)
                        node = TupleGetItem(node, int(p))
                        if self.spans is not None:
                            self.spans[node] = start
                else:
                    break
            operands.append(node)
            op = _BINOPS.get(toks[self.i])
            if op is None:
                break
            while operators and operators[-1][0] >= op[0]:
                self.reduce(operands, operators)
            operators.append((op[0], op[1], self.i))
            self.i += 1
        while operators:
            self.reduce(operands, operators)
        return operands[0]

    def reduce(self, operands: list, operators: list) -> None:
        _, name, index = operators.pop()
        rhs = operands.pop()
        lhs = operands.pop()
        try:
            node = Call(Op.get(name), [lhs, rhs])
        except IRError as e:
            raise self.error(str(e), index) from None
        if self.spans is not None:
            self.spans[node] = index
        operands.append(node)

    def p_call(self, callee: Expr, start: int):
        toks = self.toks
        self.i += 1  # (
        args: list = []
        attrs: dict = {}
        while toks[self.i] != ")":
            if self.is_attr_start():
                attrs = self.attrs(")")
                break
            arg = self.arg_fast()
            if arg is None:
                arg = yield self.p_seq()
            args.append(arg)
            if toks[self.i] == ",":
                self.i += 1
            elif toks[self.i] != ")":
                raise self.error(f"expected `,` or `)` in the argument list, found {self.describe(self.i)}")
        self.i += 1
        try:
            node = Call(callee, args, attrs or None)
        except IRError as e:
            raise self.error(str(e), start) from None
        if self.spans is not None:
            self.spans[node] = start
        return node

    def p_seq(self):
        """Bindings (``let``, ``%N = ...;``, ``free_var``) followed by an expression."""
        toks = self.toks
        lets: list = []
        bound: list = []
        while True:
            tok = toks[self.i]
            if tok == "let":
                let_at = self.i
                self.i += 1
                name, var = yield self.var_decl()
                self.expect("=")
                recursive = toks[self.i] == "fn"   # a let-bound function may call itself
                if recursive:
                    self.bind(var, name)
                value = self.fast_expr()
                if value is None:
                    value = yield self.p_binop()
                self.expect(";")
                if not recursive:
                    self.bind(var, name)
                bound.append(name)
                lets.append((var, value, let_at))
                continue
            if tok[:1] == "%" and tok[1:2].isdigit() and toks[self.i + 1] == "=":
                self.i += 2
                value = self.fast_expr()
                if value is None:
                    value = yield self.p_binop()
                if toks[self.i] == ";":
                    self.i += 1
                else:
                    self.expect(";")
                self.graph[tok] = value
                continue
            if tok == "free_var":
                self.i += 1
                name, var = yield self.var_decl()
                self.expect(";")
                self.bind(var, name)
                continue
            node = self.fast_expr()
            if node is None:
                node = yield self.p_binop()
            if toks[self.i] == ";":
                # `a; b` evaluates a, then b
                self.i += 1
                lets.append((Var("_"), node, self.i - 1))
                continue
            break
        spans = self.spans
        for var, value, at in reversed(lets):
            node = Let(var, value, node)
            if spans is not None:
                spans[node] = at
        for name in bound:
            self.unbind(name)
        return node

    def p_def(self):
        start = self.i
        self.i += 1
        tok = self.toks[self.i]
        if tok[:1] != "@" or len(tok) < 2:
            raise self.error(f"expected a global name like @main after `def`, found {self.describe(self.i)}")
        self.i += 1
        fn = yield self.p_fn_rest(tok[1:])
        return start, tok[1:], fn

    # -- driver -------------------------------------------------------------------
    def run(self, gen):
        """Drive nested parsing generators with an explicit stack."""
        stack = [gen]
        value = None
        while stack:
            try:
                sub = stack[-1].send(value)
            except StopIteration as stop:
                stack.pop()
                value = stop.value
                continue
            stack.append(sub)
            value = None
        return value

    def header(self, required: bool) -> None:
        tok = self.toks[0]
        m = _VERSION_RE.fullmatch(tok) if tok.startswith("#[") else None
        if m is None:
            if required:
                raise self.error(
                    f"expected text format semantic version, found {self.describe(0)}; {_version_hint()}", 0)
            return
        if m.group(1) != "0.0.5":
            raise self.error(f'unsupported text format version "{m.group(1)}"; {_version_hint()}', 0)
        self.i = 1

    def module(self) -> IRModule:
        self.header(required=True)
        self.module_mode = True
        toks = self.toks
        mod = IRModule()
        if self.context is not None and self.context.module is not None:
            for gv, fn in self.context.module.items():  # init_module: its functions are in scope
                self.globals[gv.name_hint] = gv
                mod[gv] = fn
        # globals may be used before their definition
        for k in range(self.i, len(toks) - 1):
            if toks[k] == "def" and toks[k + 1][:1] == "@":
                if len(toks[k + 1]) > 1:  # a bare `@` is reported where `def` reads it
                    self.globals.setdefault(toks[k + 1][1:], GlobalVar(toks[k + 1][1:]))
        while toks[self.i] != _END:
            if toks[self.i] == "def":
                start, name, fn = self.run(self.p_def())
                gv = self.globals[name]
                if gv in mod:
                    raise self.error(f"function @{name} is defined twice", start)
                mod[gv] = fn
            elif toks[self.i] in ("type", "extern"):
                raise self.error("type definitions (ADTs) are not supported by passhost")
            else:
                if "main" in mod:
                    raise self.error(f"expected `def` or the end of the module, found {self.describe(self.i)}")
                expr_start = self.i
                expr = self.run(self.p_seq())
                if toks[self.i] != _END:
                    raise self.error(f"expected the end of the module, found {self.describe(self.i)}")
                if not isinstance(expr, Function):
                    from .analysis import free_vars

                    expr = Function(free_vars(expr), expr)
                    if self.spans is not None:
                        self.spans[expr] = expr_start
                mod[self.globals.setdefault("main", GlobalVar("main"))] = expr
        return mod

    def expression(self) -> Expr:
        self.header(required=False)
        if self.toks[self.i] == _END:
            raise self.error("expected an expression, found end of input")
        expr = self.run(self.p_seq())
        if self.toks[self.i] != _END:
            raise self.error(f"unexpected {self.describe(self.i)} after the expression")
        return expr


def _infer(mod: IRModule) -> IRModule:
    try:
        from .type_infer import infer_type
    except ImportError:  # pragma: no cover - inference is part of the host
        return mod
    out = infer_type(mod)
    return out if isinstance(out, IRModule) else mod


def _locate(text: str, source_name: str, err: TypeInferenceError, context: Optional["_Context"]) -> Exception:
    """The type error ``err`` of a parsed module, with the file, line and column of the
    expression that failed: the text is parsed again recording where each node starts and
    typed again (deterministic, so it fails at the same node). Only failures pay for this."""
    parser = _Parser(text, source_name, context)
    parser.spans = {}
    mod = parser.module()
    try:
        _infer(mod)
    except TypeInferenceError as again:
        index = parser.spans.get(getattr(again, "node", None))
        if index is None:
            return again
        at = parser.error(str(again), index)
        located = SourceTypeError(at.message, at.line, at.column, at.source_line, at.source_name)
        located.node = again.node
        return located
    return err  # pragma: no cover - typing is deterministic


def _module_with_spans(parser: "_Parser") -> IRModule:
    """Parse, then give every node the :class:`~passhost.ir.Span` of its first token."""
    import bisect

    from .expr import set_span
    from .span import Span

    parser.spans = {}
    mod = parser.module()
    src = parser.src
    text = src.text
    lines = [0] + [m.end() for m in re.finditer("\n", text)]  # where each line starts
    name = src.name
    for node, index in parser.spans.items():
        offset = src.token_offset(index)
        line = bisect.bisect_right(lines, offset)
        set_span(node, Span(name, line, offset - lines[line - 1] + 1))
    return mod


@gc_paused
def parse(text: str, source_name: str = "<string>", init_module: Optional[IRModule] = None,
          init_meta_table: Optional[Any] = None, *, spans: bool = False) -> IRModule:
    """Parse a module in the text format and type it (as TVM's ``relay.parse`` does).

    The text must start with ``#[version = "0.0.5"]``. Constants written as
    ``meta[relay.Constant][i]`` are read from the ``#[metadata]`` section that
    ``astext(show_meta_data=True)`` appends, or else from ``init_meta_table``::

        parse(text, "model.txt", init_module, {"relay.Constant": [ir.const(weights)]})
        # def @main(%x: ...) { add(@f(%x), meta[relay.Constant][0]) }, @f from init_module

    :param source_name: the name used in error messages (and in spans)
    :param init_module: a module whose functions the text may call; the result holds them
        too (TVM's ``ParseModuleInContext``). A function the text defines again is an error
    :param init_meta_table: ``{"relay.Constant": [constants or arrays]}``, what
        ``meta[relay.Constant][i]`` means when the text has no ``#[metadata]`` section
    :param spans: give every call, tuple, projection, let, if and function the
        :class:`~passhost.ir.Span` (``source_name``, line, column) where it starts; the
        AnnotateSpans pass uses it. Off by default: it costs a fifth more time
    :raises ParseError: on malformed text (with line, column and a caret)
    """
    if isinstance(init_module, bool):  # parse(text, name, True): the former third parameter, spans
        init_module, spans = None, init_module
    context = None if init_module is None and init_meta_table is None else _Context(init_module, init_meta_table)
    mod = _guarded(text, source_name, _module_with_spans if spans else _Parser.module, context)
    try:
        return _infer(mod)
    except TypeInferenceError as err:
        raise _locate(text, source_name, err, context) from None
    except PasshostError:
        raise
    except (RecursionError, ValueError, TypeError, OverflowError, MemoryError) as err:
        raise ParseError(f"cannot type this module: {type(err).__name__}: {err}", source_name=source_name) from None


def _guarded(text: str, source_name: str, method: Any, context: Optional["_Context"] = None) -> Any:
    """``method(_Parser(text))``, with nothing but a :class:`PasshostError` escaping: any
    other failure caused by the input (a number too long for Python's ``int``, nesting
    deeper than a recursion somewhere) becomes a :class:`ParseError` at the token where
    the parser stood."""
    parser = None
    try:
        parser = _Parser(text, source_name, context)
        return method(parser)
    except PasshostError:
        raise
    except (RecursionError, ValueError, TypeError, OverflowError, MemoryError, IndexError, KeyError) as err:
        detail = " ".join(str(err).split())[:200]
        message = f"cannot read this input ({type(err).__name__}: {detail})"
        if parser is None or not getattr(parser, "toks", None):
            raise ParseError(message, source_name=source_name) from None
        raise parser.error(message, min(parser.i, len(parser.toks) - 3)) from None


def parse_expr(text: str, source_name: str = "<string>") -> Expr:
    """Parse one expression (the version header is optional; no type inference)."""
    with_gc = gc_paused(lambda: _guarded(text, source_name, _Parser.expression))
    return with_gc()


class _Context:
    """What a parse starts from (TVM's ``init_module`` and ``init_meta_table``), checked."""

    __slots__ = ("module", "meta")

    def __init__(self, module: Optional[IRModule], meta_table: Any) -> None:
        if module is not None and not isinstance(module, IRModule):
            raise ParseError(f"parse: init_module must be an IRModule, got {type(module).__name__}")
        self.module = module
        self.meta = None if meta_table is None else _meta_constants(meta_table)


def _meta_constants(table: Any) -> list:
    """``init_meta_table``'s constants: ``{"relay.Constant": [Constant or array, ...]}``."""
    if not isinstance(table, dict) or set(table) - {"relay.Constant"}:
        raise ParseError('parse: init_meta_table must be a dict {"relay.Constant": [constants]}, '
                         f"got {table!r:.80}")
    out = []
    for i, c in enumerate(table.get("relay.Constant", [])):
        if not isinstance(c, Constant):
            try:
                c = Constant(np.asarray(c))
            except (IRError, TypeError, ValueError) as err:
                raise ParseError(f"parse: init_meta_table['relay.Constant'][{i}] is not a constant: {err}") from None
        out.append(c)
    return out


def fromtext(text: str, source_name: str = "<string>") -> IRModule:
    """TVM's other name for :func:`parse` (``fromtext(source, source_name)``)."""
    return parse(text, source_name)
