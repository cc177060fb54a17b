"""Tokenizer and token-level readers of the Relay text format (used by
:mod:`passhost.ir.parser`): tokens, literals, the metadata section, attribute lists and
types.

Tokens are plain strings (their kind follows from the first character), produced by one
master regular expression that also skips whitespace, ``// line`` comments and
``/* block */`` comments — so the printer's ``/* ty=... */`` annotations cost nothing.
Nested block comments are supported through a slower path that blanks comments out
first. Positions are recomputed only when an error has to be reported.
"""
from __future__ import annotations

import base64
import binascii
import json
import re
from typing import Any, Optional

import ml_dtypes
import numpy as np

from ..errors import ParseError, TypeInferenceError
from .expr import Constant
from .dims import ANY, dmax, dmin, floordiv, floormod, size_var
from .types import DTYPES, FuncType, TensorType, TupleType

__all__ = ["tokenize", "Source", "TokenReader", "literal", "decode_metadata"]

_KEYWORDS = frozenset(["let", "fn", "def", "if", "else", "free_var", "meta", "type", "match", "extern",
                       "ref", "ref_read", "ref_write", "True", "False", "None", "nullptr"])
_END = ""  # the token returned past the end of the input
#: tokens that continue a dimension expression after an operand
_DIM_INFIX = frozenset({"+", "-", "*"})
_FLOAT_WORD = re.compile(r"(?:inf|nan)(?:bf16|f(?:16|32|64)?)?")
_DIM_FUNCS = {"floordiv": floordiv, "floormod": floormod, "min": dmin, "max": dmax}
#: type names TVM's parser reads as a dtype
_TYPE_ALIASES = {"int": "int32"}

_NUMBER_RE = re.compile(r"(-?)([0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?|inf|nan)([A-Za-z][A-Za-z0-9]*)?$")
_INT_SUFFIX = {"": "int32", "i": "int32", "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64",
               "u8": "uint8"}
_FLOAT_SUFFIX = {"f": "float32", "f16": "float16", "f32": "float32", "f64": "float64", "bf16": "bfloat16"}
#: largest finite value per float dtype (``np.finfo`` per literal is slow; ml_dtypes' finfo
#: knows bfloat16 as well)
_FLOAT_MAX = {d: float(ml_dtypes.finfo(d).max) for d in set(_FLOAT_SUFFIX.values())}
_INT_RANGE = {"int8": (-2**7, 2**7 - 1), "int16": (-2**15, 2**15 - 1), "int32": (-2**31, 2**31 - 1),
              "int64": (-2**63, 2**63 - 1), "uint8": (0, 255)}

# No possessive quantifiers (Python 3.10 lacks them). The token alternation below always
# matches (it ends with "." and "\Z"), so the skip group is never backtracked into.
# Block comments are matched "unrolled" (a run of ordinary characters, then a lone `*` or
# `/` and another run) rather than one character per alternation step: same language
# (no `/*` inside, so nested comments still fall to the slow path), about 1.5x faster.
_SKIP = r"(?:\s+|//[^\n]*|/\*[^*/]*(?:(?:\*(?!/)|/(?!\*))[^*/]*)*\*/)*"
_TOKEN = (
    r"#\[[^\]\n]*\]"                                     # #[version = "0.0.5"], #[metadata]
    r"|%[A-Za-z0-9_]+(?:/[A-Za-z0-9_]+|\.[A-Za-z_][A-Za-z0-9_]*)*"  # %x, %0, %base/conv1.weight (%0.1: a projection)
    r"|@[A-Za-z_][A-Za-z0-9_.]*"                         # @main
    r"|-?(?:inf|nan)(?:bf16|f(?:16|32|64)?)(?![A-Za-z0-9_])"  # inff, -inff16, nanf, infbf16
    r"|-?[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?(?:[A-Za-z][A-Za-z0-9]*)?"  # 1, 1.5f, 1e-05f, 3i64
    r"|[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*"   # identifiers, dotted op names
    r'|"(?:[^"\\\n]|\\.)*"'                             # strings
    r"|->|=>|==|!=|<=|>=|/\*"
    r"|[()\[\]{},;:=.+\-*/<>?!]"
    r"|."                                                # anything else: reported by the parser
    r"|\Z"                                              # end (so trailing comments are skipped)
)
_FAST = re.compile(_SKIP + "(" + _TOKEN + ")", re.S)


class Source:
    """The text being parsed, for turning offsets into ``line:column`` diagnostics."""

    def __init__(self, text: str, name: str) -> None:
        self.text = text
        self.name = name
        self._starts = None

    def token_offset(self, index: int) -> int:
        """Offset of token number ``index`` (or the end of the text)."""
        starts = self._starts
        if starts is None:
            starts = self._starts = [m.start(1) for m in _FAST.finditer(self.text)]
        if 0 <= index < len(starts):
            return starts[index]
        return len(self.text.rstrip()) if self.text.strip() else 0

    def error(self, message: str, offset: int) -> ParseError:
        text = self.text
        line = text.count("\n", 0, offset) + 1
        start = text.rfind("\n", 0, offset) + 1
        end = text.find("\n", offset)
        if end < 0:
            end = len(text)
        return ParseError(message, line, offset - start + 1, text[start:end], self.name)


def _blank_comments(src: Source) -> str:
    """Replace every (possibly nested) block comment and line comment by spaces,
    keeping newlines so that line numbers stay right."""
    text = src.text
    out = []
    i = 0
    n = len(text)
    start = 0
    while i < n:
        c = text[i]
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"' and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            i = j + 1
        elif c == "/" and text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(text[start:i])
            out.append(" " * (j - i))
            i = start = j
        elif c == "/" and text.startswith("/*", i):
            depth = 0
            j = i
            while j < n:
                if text.startswith("/*", j):
                    depth += 1
                    j += 2
                elif text.startswith("*/", j):
                    depth -= 1
                    j += 2
                    if depth == 0:
                        break
                else:
                    j += 1
            if depth:
                raise src.error("unterminated comment: close it with */", i)
            out.append(text[start:i])
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = start = j
        else:
            i += 1
    out.append(text[start:])
    return "".join(out)


def tokenize(src: Source) -> list:
    """The tokens of ``src`` as a list of strings."""
    toks = _FAST.findall(src.text)
    if "/*" in toks:
        # a nested (or unterminated) block comment: blank comments out, then tokenize
        src.text = _blank_comments(src)
        src._starts = None
        toks = _FAST.findall(src.text)
    if toks and toks[-1] == "":
        toks.pop()
    return toks


def literal(tok: str, as_attr: bool = False):
    """The value of a numeric token: a rank-0 numpy array of the literal's dtype
    (``1f`` float32, ``3f16``, ``3bf16``, ``3f64``, ``42`` int32 — int64 when it does not fit —,
    ``42i16``, ``42i64``), or a plain ``int``/``float`` when ``as_attr``.

    :raises ValueError: with the message to report (missing ``f`` suffix, out of range, ...)
    """
    m = _NUMBER_RE.match(tok)
    if m is None:
        raise ValueError(f"malformed number `{tok}`")
    sign, digits, suffix = m.group(1), m.group(2), m.group(3) or ""
    if suffix in _FLOAT_SUFFIX:
        dtype = _FLOAT_SUFFIX[suffix]
        value = float(sign + digits)
        if as_attr:
            return value
        if digits != "inf" and abs(value) > _FLOAT_MAX[dtype]:
            raise ValueError(f"literal `{tok}` cannot be represented as {dtype}")
        return np.array(value, dtype=dtype)
    if suffix not in _INT_SUFFIX:
        raise ValueError(
            f"unknown literal suffix `{suffix}` in `{tok}`: use f, f16, bf16, f64 for floats or i16, i64 for integers")
    if not digits[0].isdigit() or "." in digits or "e" in digits or "E" in digits:
        raise ValueError(f"float literals need an `f` suffix: write `{sign}{digits}f`")
    value = int(sign + digits)
    if as_attr:
        if not -2 ** 63 <= value < 2 ** 63:  # attributes are int64, as in TVM
            raise ValueError(f"attribute value `{tok}` does not fit in int64")
        return value
    dtype = _INT_SUFFIX[suffix]
    lo, hi = _INT_RANGE[dtype]
    if suffix == "" and not lo <= value <= hi:
        dtype = "int64"
        lo, hi = _INT_RANGE[dtype]
    if not lo <= value <= hi:
        raise ValueError(f"literal `{tok}` does not fit in {dtype}")
    return np.array(value, dtype=dtype)


def decode_metadata(text: str) -> list:
    """The arrays of a ``#[metadata]`` section (JSON written by the printer:
    ``{"relay.Constant": [{"dtype", "shape", "data": base64 of little-endian C-order
    bytes}, ...]}``). Never unpickles anything.

    :raises ValueError: with the message to report
    """
    try:
        data = json.loads(text)
    except ValueError as e:
        raise ValueError(f"the #[metadata] section is not valid JSON ({e})") from None
    except RecursionError:
        raise ValueError("the #[metadata] section nests JSON too deeply (passhost writes a flat list of "
                         "constants)") from None
    if not isinstance(data, dict):
        raise ValueError('the #[metadata] section must be a JSON object {"relay.Constant": [...]}')
    entries = data.get("relay.Constant", [])
    if not isinstance(entries, list):
        raise ValueError('"relay.Constant" in the #[metadata] section must be a list of constants, '
                         f"found {type(entries).__name__}")
    arrays = []
    for j, entry in enumerate(entries):
        try:
            dtype = entry["dtype"]
            if dtype not in DTYPES:
                raise ValueError(f"unknown dtype {dtype!r}")
            shape = tuple(int(d) for d in entry["shape"])
            if any(type(d) is not int or not 0 <= d < 2 ** 63 for d in entry["shape"]):
                raise ValueError(f"shape {list(entry['shape'])} must hold integers from 0 to 2**63 - 1")
            raw = base64.b64decode(entry["data"], validate=True)
            arr = np.frombuffer(raw, dtype=np.dtype(dtype).newbyteorder("<"))
            arrays.append(arr.reshape(shape).astype(np.dtype(dtype), copy=True))
        except (KeyError, TypeError, ValueError, OverflowError, binascii.Error) as e:
            raise ValueError(f"relay.Constant entry {j} of the #[metadata] section is malformed ({e})") from None
    return arrays


#: how deeply attribute values may nest (``[[1, 2], [3, 4]]`` is 2); deeper values are
#: refused where they start, as nothing in the operator library takes them
MAX_ATTR_DEPTH = 32


class TokenReader:
    """Token-level reading shared by the parser: diagnostics, literals, metadata,
    attribute lists and types. Subclasses set ``toks`` (ending with ``_END``), ``i``,
    ``src``, ``meta_text``, ``meta_line``, ``_meta`` and ``_literals`` (an empty dict)."""

    toks: list
    i: int
    src: Source
    _literals: dict   # numeric token -> its read-only rank-0 array

    # -- diagnostics -------------------------------------------------------------
    def error(self, message: str, index: Optional[int] = None) -> ParseError:
        k = self.i if index is None else index
        return self.src.error(message, self.src.token_offset(k))

    def describe(self, index: int) -> str:
        tok = self.toks[index]
        return "end of input" if tok == _END else f"`{tok}`"

    def expect(self, tok: str) -> None:
        if self.toks[self.i] != tok:
            raise self.error(f"expected `{tok}`, found {self.describe(self.i)}")
        self.i += 1

    # -- metadata and literals ---------------------------------------------------
    def meta_table(self, index: int) -> list:
        if self._meta is not None:
            return self._meta
        if self.meta_text is None:
            if "metadata section has been omitted" in self.src.text:
                raise self.error(
                    "the constants' data was left out when this text was written (passhost run "
                    "--no-meta-data, or astext(show_meta_data=False)), so meta[relay.Constant][...] "
                    "cannot be read back: write it again without --no-meta-data", index)
            raise self.error(
                "the text refers to meta[relay.Constant][...] but has no #[metadata] section: "
                "print the module with astext(show_meta_data=True) to include the constant data",
                index,
            )
        try:
            self._meta = [Constant(arr) for arr in decode_metadata(self.meta_text)]
        except ValueError as e:
            raise ParseError(str(e), self.meta_line, 1, "#[metadata]", self.src.name) from None
        return self._meta

    def number(self, tok: str, index: int, as_attr: bool = False) -> Any:
        """A numeric token as a scalar :class:`Constant` (or a plain value for attrs).

        Each literal spelling is decoded once per parse (into a read-only array that
        the constants of that spelling share; every occurrence is still its own node)."""
        if not as_attr:
            arr = self._literals.get(tok)
            if arr is not None:
                return Constant(arr)
        try:
            value = literal(tok, as_attr)
        except ValueError as e:
            raise self.error(str(e), index) from None
        if as_attr:
            return value
        value.flags.writeable = False
        self._literals[tok] = value
        return Constant(value)

    def attr_value(self) -> Any:
        """``1``, ``2e-05f``, ``True``, ``"NCHW"``, ``None``, ``[1, 1]``, ``{k=v}``
        (nesting allowed; parsed with an explicit stack)."""
        toks = self.toks
        stack: list = []   # [container, closing token, key of the value being parsed]
        while True:
            if stack and stack[-1][1] == "}":
                stack[-1][2] = self.attr_key(stack[-1][0])
            tok = toks[self.i]
            start = self.i
            self.i += 1
            if tok in ("[", "(", "{"):
                close = {"[": "]", "(": ")", "{": "}"}[tok]
                if toks[self.i] == close:
                    self.i += 1
                    value: Any = {} if tok == "{" else ()
                else:
                    if len(stack) >= MAX_ATTR_DEPTH:
                        raise self.error(f"attribute value nested deeper than {MAX_ATTR_DEPTH} levels "
                                         "(operator attributes are flat lists, or lists of lists)", start)
                    stack.append([{} if tok == "{" else [], close, None])
                    continue
            elif tok == "?" or tok == "-" or ((tok[:1].isalpha() or tok[:1] == "_") and tok not in _KEYWORDS
                                              and not _FLOAT_WORD.fullmatch(tok)) \
                    or (toks[self.i] in _DIM_INFIX and re.fullmatch(r"-?[0-9]+", tok)):
                self.i = start  # a dimension: `batch`, `2*seq + 1`, `?` (a shape attribute)
                value = self.dim()
            elif tok[:1].isdigit() or (tok[:1] == "-" and len(tok) > 1) or tok[:3] in ("inf", "nan"):
                value = self.number(tok, start, as_attr=True)
            elif tok == "True" or tok == "False":
                value = tok == "True"
            elif tok == "None" or tok == "nullptr":
                value = None
            elif tok[:1] == '"':
                value = json.loads(tok)
            else:
                raise self.error(f"expected an attribute value, found {self.describe(start)}", start)
            while stack:
                items, close, key = stack[-1]
                if close == "}":
                    items[key] = value
                else:
                    items.append(value)
                if toks[self.i] == ",":
                    self.i += 1
                    if toks[self.i] != close:
                        break
                if toks[self.i] != close:
                    raise self.error(f"expected `,` or `{close}`, found {self.describe(self.i)}")
                self.i += 1
                stack.pop()
                value = items if close == "}" else tuple(items)
            else:
                return value

    def attr_key(self, seen) -> str:
        """``name =`` in an attribute list; returns the name."""
        key = self.toks[self.i]
        if not key[:1].isalpha() and key[:1] != "_":
            raise self.error(f"expected an attribute name, found {self.describe(self.i)}")
        if key in seen:
            raise self.error(f"attribute `{key}` is given twice")
        self.i += 1
        self.expect("=")
        return key

    def attrs(self, terminator: str) -> dict:
        """``key=value`` pairs up to (not including) ``terminator``."""
        out: dict = {}
        toks = self.toks
        while True:
            key = self.attr_key(out)
            out[key] = self.attr_value()
            if toks[self.i] != ",":
                break
            self.i += 1
        if toks[self.i] != terminator:
            raise self.error(f"expected `,` or `{terminator}`, found {self.describe(self.i)}")
        return out

    def is_attr_start(self) -> bool:
        tok = self.toks[self.i]
        return (tok[:1].isalpha() or tok[:1] == "_") and tok not in _KEYWORDS and self.toks[self.i + 1] == "="

    # -- dimensions -------------------------------------------------------------------
    def dim(self) -> Any:
        """One dimension of a shape or a shape attribute: ``768``, ``?``, ``batch``,
        ``2*seq + 1``, ``floordiv(n, 2)`` (see :mod:`passhost.ir.dims`)."""
        start = self.i
        tok = self.toks[start]
        m = re.fullmatch(r"([0-9]+)(i64|i32)?", tok)
        if m is not None and self.toks[start + 1] not in _DIM_INFIX and not self.toks[start + 1].startswith("-"):
            if len(m.group(1)) > 19:  # beyond int64 (and Python's 4300-digit int parsing limit)
                raise self.error(f"dimension {m.group(1)[:12]}... ({len(m.group(1))} digits) is too large")
            self.i += 1
            return int(m.group(1))
        if tok == "?":
            self.i += 1
            return ANY
        try:
            return self._dim_sum(0)
        except (ValueError, TypeInferenceError) as err:
            raise self.error(f"bad dimension: {err}", start) from None

    def _dim_sum(self, depth: int) -> Any:
        if depth > MAX_ATTR_DEPTH:
            raise ValueError("dimension expression nested too deeply")
        value = self._dim_product(depth)
        toks = self.toks
        while True:
            tok = toks[self.i]
            if tok in ("+", "-"):
                self.i += 1
                rhs = self._dim_product(depth)
                value = value + rhs if tok == "+" else value - rhs
            elif tok[:1] == "-" and tok[1:2].isdigit():  # `n-1` lexes as `n`, `-1`
                toks[self.i] = tok[1:]
                rhs = self._dim_product(depth)
                value = value - rhs
            else:
                return value

    def _dim_product(self, depth: int) -> Any:
        value = self._dim_atom(depth)
        while self.toks[self.i] == "*":
            self.i += 1
            value = value * self._dim_atom(depth)
        return value

    def _dim_atom(self, depth: int) -> Any:
        toks = self.toks
        tok = toks[self.i]
        self.i += 1
        if tok == "-":
            return -self._dim_atom(depth)
        if tok == "?":
            return ANY
        m = re.fullmatch(r"(-?[0-9]+)(i64|i32)?", tok)
        if m is not None:
            if len(m.group(1)) > 20:
                raise ValueError(f"{m.group(1)[:12]}... ({len(m.group(1))} digits) is too large")
            return int(m.group(1))
        if tok == "(":
            value = self._dim_sum(depth + 1)
            self._dim_expect(")")
            return value
        if tok in _DIM_FUNCS and toks[self.i] == "(":
            self.i += 1
            a = self._dim_sum(depth + 1)
            self._dim_expect(",")
            b = self._dim_sum(depth + 1)
            self._dim_expect(")")
            return _DIM_FUNCS[tok](a, b)
        if (tok[:1].isalpha() or tok[:1] == "_") and tok not in _KEYWORDS and "." not in tok:
            return size_var(tok)
        self.i -= 1
        raise ValueError(f"expected a dimension (an int, a size variable or ?), found {self.describe(self.i)}")

    def _dim_expect(self, tok: str) -> None:
        if self.toks[self.i] != tok:
            raise ValueError(f"expected `{tok}`, found {self.describe(self.i)}")
        self.i += 1

    # -- types ------------------------------------------------------------------------
    def p_type(self):
        toks = self.toks
        start = self.i
        tok = toks[start]
        self.i += 1
        if tok in DTYPES:
            return TensorType((), tok)
        if tok in _TYPE_ALIASES:  # TVM reads `int` as int32
            return TensorType((), _TYPE_ALIASES[tok])
        if tok == "Tensor":
            self.expect("[")
            self.expect("(")
            dims = []
            while toks[self.i] != ")":
                at = self.i
                d = self.dim()
                if type(d) is int and d < 0:
                    raise self.error(f"a dimension cannot be negative ({d})", at)
                dims.append(d)
                if toks[self.i] == ",":
                    self.i += 1
                elif toks[self.i] != ")":
                    raise self.error(f"expected `,` or `)` in the shape, found {self.describe(self.i)}")
            self.i += 1
            self.expect(",")
            dtype = toks[self.i]
            if dtype not in DTYPES:
                raise self.error(f"unknown dtype `{dtype}`: use one of {', '.join(sorted(DTYPES))}")
            self.i += 1
            self.expect("]")
            return TensorType(dims, dtype)
        if tok == "(":
            fields = []
            while toks[self.i] != ")":
                fields.append((yield self.p_type()))
                if toks[self.i] == ",":
                    self.i += 1
                elif toks[self.i] != ")":
                    raise self.error(f"expected `,` or `)` in the tuple type, found {self.describe(self.i)}")
            self.i += 1
            return TupleType(fields)
        if tok == "fn":
            self.expect("(")
            args = []
            while toks[self.i] != ")":
                args.append((yield self.p_type()))
                if toks[self.i] == ",":
                    self.i += 1
                elif toks[self.i] != ")":
                    raise self.error(f"expected `,` or `)` in the function type, found {self.describe(self.i)}")
            self.i += 1
            self.expect("->")
            ret = yield self.p_type()
            return FuncType(args, ret)
        raise self.error(f"expected a type, found {self.describe(start)}", start)
