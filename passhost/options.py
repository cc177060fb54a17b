"""Declared, typed options of passes and instruments, checked before anything runs.

A pass's options are its factory's keyword parameters, as in xDSL's dataclass passes
and MLIR's ``Option<>``: a name, a type (the annotation), a default and one line of doc
(the ``:param NAME:`` line of the factory's docstring). A plugin gets the schema for
free from a signature like::

    class FuseOps(FunctionPass):
        '''...
        :param fuse_opt_level: -1 uses the PassContext's opt_level; 0 fuses nothing
        '''
        def __init__(self, fuse_opt_level: int = -1): ...

or declares it on its record when the signature cannot say it (a required option, a
type narrower than the annotation)::

    PassEntry("ConvertLayout", ConvertLayout,
              options=(Option("desired_layouts", dict, doc="{op: [data_layout, kernel_layout]}",
                              required=True),))

The registry then refuses ``FuseOps(level=1)`` or ``FuseOps(fuse_opt_level="2")``
with the list of valid options and their types (:class:`OptionError`, exit 2 on the
command line) instead of the factory's raw ``TypeError``, and ``passhost info`` and
``passhost list --json`` show the table. A factory that takes ``**options`` and
declares nothing keeps an *open* schema: names are not checked, only declared ones are.

Types are Python types and the usual ``typing`` forms: ``int``, ``float`` (an int is
accepted), ``bool``, ``str``, ``list``/``tuple``/``Sequence`` (either sequence is
accepted), ``dict``/``Mapping``, ``Callable``, ``Optional[X]``/``X | None``, ``Union``,
``Literal[...]`` and parameterised forms such as ``tuple[int, ...]``.
"""
from __future__ import annotations

import collections.abc
import inspect
import re
import types
import typing

from dataclasses import dataclass
from typing import Any, Callable, Optional

from .errors import OptionError

__all__ = ["Option", "OptionSchema", "schema_of", "accepts", "type_name", "param_docs", "plain_doc", "jsonable"]

_EMPTY = inspect.Parameter.empty
_SEQUENCES = (list, tuple, collections.abc.Sequence, typing.Sequence)
_MAPPINGS = (dict, collections.abc.Mapping, typing.Mapping)
_COLLECTIONS = (collections.abc.Iterable, typing.Iterable, collections.abc.Collection, typing.Collection,
                set, frozenset, collections.abc.Set, typing.AbstractSet)


@dataclass(frozen=True)
class Option:
    """One option of a pass or instrument.

    :param name: the keyword the factory takes
    :param type: the type a value must have (see the module docs for the forms read)
    :param default: the value used when the option is not given
    :param doc: one line shown by ``passhost info`` and in option errors
    :param required: the option must be given (``default`` is then unused)
    """

    name: str
    type: Any = object
    default: Any = None
    doc: str = ""
    required: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise TypeError(f"Option: name must be a Python identifier, got {self.name!r}")
        if not isinstance(self.doc, str):
            raise TypeError(f"Option {self.name!r}: doc must be a string, got {self.doc!r}")
        if not isinstance(self.required, bool):
            raise TypeError(f"Option {self.name!r}: required must be True or False, got {self.required!r}")

    @property
    def type_name(self) -> str:
        return type_name(self.type)

    def describe(self) -> str:
        """``name: type = default`` (or ``name: type, required``)."""
        tail = ", required" if self.required else f" = {_short_repr(self.default)}"
        return f"{self.name}: {self.type_name}{tail}"

    def as_dict(self) -> dict:
        return {"name": self.name, "type": self.type_name, "required": self.required,
                "default": None if self.required else jsonable(self.default), "doc": self.doc}


@dataclass(frozen=True)
class OptionSchema:
    """The options of one pass or instrument; ``open`` if undeclared names are passed on."""

    options: tuple = ()
    open: bool = False

    def get(self, name: str) -> Optional[Option]:
        for o in self.options:
            if o.name == name:
                return o
        return None

    def listing(self) -> str:
        if not self.options:
            return "it takes no options" if not self.open else "it declares no options"
        return "its options: " + "; ".join(o.describe() for o in self.options)

    def validate(self, owner: str, given: dict) -> None:
        """Raise :class:`OptionError` unless ``given`` fits: known names, right types, required ones there.

        :param owner: how to name the pass in the message (``"pass 'FuseOps' (passhost-fuse-ops==0.1.0)"``)
        """
        for name, value in given.items():
            option = self.get(name)
            if option is None:
                if self.open:
                    continue
                near = _nearest(name, [o.name for o in self.options])
                hint = f" (did you mean {near!r}?)" if near else ""
                raise OptionError(f"{owner} has no option {name!r}{hint}; {self.listing()}")
            if not accepts(option.type, value):
                raise OptionError(f"{owner}: option {name!r} must be {option.type_name}, got "
                                  f"{_short_repr(value)} ({type(value).__name__}); {self.listing()}")
        missing = [o for o in self.options if o.required and o.name not in given]
        if missing:
            shown = "; ".join(f"{o.name} ({o.type_name})" + (f": {o.doc}" if o.doc else "") for o in missing)
            raise OptionError(f"{owner} needs the option{'s' if len(missing) > 1 else ''} {shown}")

    def as_list(self) -> list:
        return [o.as_dict() for o in self.options]


def schema_of(factory: Callable, declared: Optional[tuple] = None) -> OptionSchema:
    """The option schema of ``factory``: ``declared`` if given, else read from its signature.

    :raises TypeError: if a declared option is a name the factory does not take
    """
    try:
        sig = _signature(factory)
    except Exception:  # no signature to read (a builtin, or plugin code that raises): undeclared
        sig = None
    params = {} if sig is None else {
        p.name: p for p in sig.parameters.values()
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    takes_any = sig is None or any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values())
    if declared is not None:
        for o in declared:
            if o.name not in params and not takes_any:
                raise TypeError(f"declares option {o.name!r}, which its factory does not take "
                                f"(it takes: {', '.join(params) or 'nothing'})")
        return OptionSchema(tuple(declared), open=False)
    try:
        docs = param_docs(factory)
    except Exception:  # a __doc__ that raises: no docs, the schema stands
        docs = {}
    options = []
    for p in params.values():
        tp = p.annotation
        if tp is _EMPTY or isinstance(tp, str):
            tp = _type_of_default(p.default)
        options.append(Option(p.name, tp, None if p.default is _EMPTY else p.default,
                              docs.get(p.name, ""), required=p.default is _EMPTY))
    return OptionSchema(tuple(options), open=takes_any)


def _signature(factory: Callable) -> inspect.Signature:
    try:
        return inspect.signature(factory, eval_str=True)
    except Exception:  # an annotation naming something only imported for type checkers
        return inspect.signature(factory)


def _type_of_default(default: Any) -> Any:
    if default is _EMPTY or default is None:
        return object
    if isinstance(default, (bool, int, float, str)):
        return type(default)
    if isinstance(default, (list, tuple)):
        return collections.abc.Sequence
    if isinstance(default, dict):
        return dict
    return object


# --------------------------------------------------------------------------------------
# type checks and names
# --------------------------------------------------------------------------------------
def accepts(tp: Any, value: Any) -> bool:
    """Whether ``value`` has type ``tp`` (an int is a float; a list and a tuple are sequences)."""
    if tp is object or tp is Any or tp is _EMPTY:
        return True
    if tp is None or tp is type(None):
        return value is None
    if isinstance(tp, tuple):
        return any(accepts(t, value) for t in tp)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Union or origin is types.UnionType:
        return any(accepts(a, value) for a in args)
    if origin is typing.Literal:
        return any(value == a and type(value) is type(a) for a in args)
    if tp is bool:
        return isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if tp is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if tp in _SEQUENCES or origin in _SEQUENCES:
        if not isinstance(value, (list, tuple)):
            return False
        if not args:
            return True
        if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
            return len(args) == len(value) and all(accepts(a, v) for a, v in zip(args, value))
        return all(accepts(args[0], v) for v in value)
    if tp in _COLLECTIONS or origin in _COLLECTIONS:  # any literal collection; a string is not one
        if not isinstance(value, (list, tuple, set, frozenset)):
            return False
        return not args or all(accepts(args[0], v) for v in value)
    if tp in _MAPPINGS or origin in _MAPPINGS:
        if not isinstance(value, dict):
            return False
        return not args or all(accepts(args[0], k) and accepts(args[1], v) for k, v in value.items())
    if tp is collections.abc.Callable or origin is collections.abc.Callable or tp is typing.Callable:
        return callable(value)
    if isinstance(tp, type):
        return isinstance(value, tp)
    return True  # a typing form not read here: the factory checks it


def type_name(tp: Any) -> str:
    """How ``tp`` reads in a table: ``int``, ``int | None``, ``'a' | 'b'``, ``tuple[int, ...]``."""
    if tp is object or tp is Any or tp is _EMPTY:
        return "any"
    if tp is None or tp is type(None):
        return "None"
    if isinstance(tp, tuple):
        return " | ".join(type_name(t) for t in tp)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Union or origin is types.UnionType:
        return " | ".join(type_name(a) for a in args)
    if origin is typing.Literal:
        return " | ".join(repr(a) for a in args)
    if tp is collections.abc.Callable or origin is collections.abc.Callable or tp is typing.Callable:
        return "callable"
    if tp in _SEQUENCES or tp in _COLLECTIONS:
        return "tuple" if tp is tuple else "list"
    if tp in _MAPPINGS:
        return "dict"
    if origin is not None:
        seq = (origin in _SEQUENCES and origin is not tuple) or origin in _COLLECTIONS
        base = "list" if seq else getattr(origin, "__name__", str(origin))
        base = "dict" if origin in _MAPPINGS else base
        inner = ", ".join("..." if a is Ellipsis else type_name(a) for a in args)
        return f"{base}[{inner}]"
    if isinstance(tp, type):
        return tp.__name__
    return str(tp).replace("typing.", "")


def _short_repr(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def jsonable(value: Any) -> Any:
    """``value`` as JSON can hold it: literals as they are, sequences as lists, dict keys as
    strings, anything else as its ``repr`` (option defaults, a reproducer's config)."""
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)


def _nearest(name: str, names: list) -> Optional[str]:
    import difflib

    found = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    return found[0] if found else None


# --------------------------------------------------------------------------------------
# docstrings: ``:param`` lines and plain text
# --------------------------------------------------------------------------------------
_PARAM = re.compile(r"^:param\s+(?:[\w\[\], .|]+\s+)?(\w+):\s*(.*)$")


def param_docs(factory: Callable) -> dict:
    """``{name: one line}`` from the ``:param NAME:`` fields of the factory's docstrings."""
    found: dict = {}
    for obj in (factory, getattr(factory, "__init__", None)):
        doc = getattr(obj, "__doc__", None)
        if isinstance(doc, str):
            for name, text in _param_fields(doc):
                found.setdefault(name, text)
    return found


def _param_fields(doc: str) -> list:
    fields, current = [], None
    for line in inspect.cleandoc(doc).splitlines():
        stripped = line.strip()
        m = _PARAM.match(stripped)
        if m:
            current = [m.group(1), [m.group(2)]]
            fields.append(current)
        elif current is not None and stripped and line[:1].isspace():
            current[1].append(stripped)
        else:
            current = None
    return [(name, plain_doc(" ".join(parts))) for name, parts in fields]


_ROLE = re.compile(r":(?:class|func|meth|attr|data|mod|obj|exc|ref|doc):`~?([^`]+)`")


def plain_doc(text: str) -> str:
    """reST markup as plain text: ``x`` -> x, :class:`~a.B` -> B, ``Before::`` -> ``Before:``."""
    text = _ROLE.sub(lambda m: m.group(1).rsplit(".", 1)[-1] if m.group(0).count("~") else m.group(1), text)
    text = re.sub(r"``([^`]+)``", r"\1", text)
    text = re.sub(r"(?m)(\S)::$", r"\1:", text)
    return re.sub(r"(?m)^::$", "", text)
