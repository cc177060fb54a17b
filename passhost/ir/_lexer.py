"""Tokenizer of the Relay text format (used by :mod:`passhost.ir.parser`).

Tokens are plain strings (their kind follows from the first character), produced by one
master regular expression that also skips whitespace, ``// line`` comments and
``/* block */`` comments — so the printer's ``/* ty=... */`` annotations cost nothing.
Nested block comments are supported through a slower path that blanks comments out
first. Positions are recomputed only when an error has to be reported.
"""
from __future__ import annotations

import re

from ..errors import ParseError

__all__ = ["tokenize", "Source"]

_SKIP = r"(?:\s++|//[^\n]*+|/\*(?:[^*/]++|\*(?!/)|/(?!\*))*+\*/)*+"
_TOKEN = (
    r"#\[[^\]\n]*\]"                                     # #[version = "0.0.5"], #[metadata]
    r"|%[A-Za-z0-9_]+"                                   # %x, %0
    r"|@[A-Za-z_][A-Za-z0-9_.]*"                         # @main
    r"|-?(?:inf|nan)f(?:16|32|64)?(?![A-Za-z0-9_])"      # inff, -inff16, nanf
    r"|-?[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?(?:[A-Za-z][A-Za-z0-9]*)?"  # 1, 1.5f, 1e-05f, 3i64
    r"|[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*"   # identifiers, dotted op names
    r'|"(?:[^"\\\n]|\\.)*+"'                             # strings
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
