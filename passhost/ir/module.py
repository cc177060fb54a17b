"""IRModule: a named collection of global functions.

Modules are cheap to copy (:meth:`IRModule.copy` shares the functions); passes
return new modules rather than mutating their input.
"""
from __future__ import annotations

from typing import Any, Iterator, Mapping, Optional, Union

from ..errors import IRError
from .expr import Expr, Function, GlobalVar

__all__ = ["IRModule"]


class IRModule:
    """Global functions keyed by :class:`GlobalVar`.

    ``mod["main"]`` returns a function by name; ``mod["f"] = func`` adds or replaces one.
    """

    __slots__ = ("_funcs", "_by_name", "attrs")

    def __init__(self, functions: Optional[Mapping[Union[str, GlobalVar], Function]] = None,
                 attrs: Optional[dict] = None) -> None:
        self._funcs: dict = {}
        self._by_name: dict = {}
        self.attrs = dict(attrs or {})
        if functions:
            for key, func in functions.items():
                self[key] = func

    # -- construction ---------------------------------------------------------
    @staticmethod
    def from_expr(expr: Expr, functions: Optional[Mapping] = None) -> "IRModule":
        """A module whose ``main`` is ``expr`` (wrapped in a function of its free
        variables when it is not a function already)."""
        if not isinstance(expr, Expr):
            raise IRError(f"IRModule.from_expr needs an expression, got {type(expr).__name__}")
        if not isinstance(expr, Function):
            from .analysis import free_vars

            expr = Function(free_vars(expr), expr)
        mod = IRModule(functions)
        mod["main"] = expr
        return mod

    def copy(self) -> "IRModule":
        """A shallow copy: same functions, independent mapping."""
        new = IRModule.__new__(IRModule)
        new._funcs = dict(self._funcs)
        new._by_name = dict(self._by_name)
        new.attrs = dict(self.attrs)
        return new

    shallow_copy = copy

    # -- access ------------------------------------------------------------------
    @property
    def functions(self) -> dict:
        """``{GlobalVar: Function}`` (a copy; mutate through ``mod[name] = f``)."""
        return dict(self._funcs)

    def get_global_var(self, name: str) -> GlobalVar:
        """The :class:`GlobalVar` of the function called ``name``."""
        try:
            return self._by_name[name]
        except KeyError:
            raise IRError(self._missing(name)) from None

    def get_global_vars(self) -> list:
        return sorted(self._funcs, key=lambda g: g.name_hint)

    def _missing(self, name: str) -> str:
        names = ", ".join(sorted(self._by_name)) or "none"
        return f"module has no function @{name} (functions: {names})"

    def _key(self, key: Union[str, GlobalVar]) -> GlobalVar:
        if isinstance(key, GlobalVar):
            return key
        if isinstance(key, str):
            return self.get_global_var(key)
        raise IRError(f"module keys are names or GlobalVars, got {key!r}")

    def __getitem__(self, key: Union[str, GlobalVar]) -> Function:
        gv = self._key(key)
        try:
            return self._funcs[gv]
        except KeyError:
            raise IRError(self._missing(gv.name_hint)) from None

    def __setitem__(self, key: Union[str, GlobalVar], func: Function) -> None:
        if not isinstance(func, Function):
            raise IRError(f"module entries must be Functions, got {type(func).__name__}")
        if isinstance(key, str):
            gv = self._by_name.get(key) or GlobalVar(key)
        elif isinstance(key, GlobalVar):
            gv = key
            old = self._by_name.get(gv.name_hint)
            if old is not None and old is not gv:
                del self._funcs[old]
        else:
            raise IRError(f"module keys are names or GlobalVars, got {key!r}")
        self._by_name[gv.name_hint] = gv
        self._funcs[gv] = func

    add = __setitem__

    def __delitem__(self, key: Union[str, GlobalVar]) -> None:
        gv = self._key(key)
        del self._funcs[gv]
        del self._by_name[gv.name_hint]

    remove = __delitem__

    def __contains__(self, key: object) -> bool:
        if isinstance(key, str):
            return key in self._by_name
        return key in self._funcs

    def __iter__(self) -> Iterator[GlobalVar]:
        return iter(self._funcs)

    def __len__(self) -> int:
        return len(self._funcs)

    def items(self):
        return self._funcs.items()

    def update(self, other: "IRModule") -> None:
        """Add (or replace) every function of ``other``."""
        if not isinstance(other, IRModule):
            raise IRError(f"IRModule.update needs an IRModule, got {type(other).__name__}")
        for gv, func in other._funcs.items():
            self[gv] = func

    def update_func(self, gv: GlobalVar, func: Function) -> None:
        self[gv] = func

    # -- text -----------------------------------------------------------------------
    def __str__(self) -> str:
        from .printer import pretty_print

        return pretty_print(self)

    def astext(self, show_meta_data: bool = True, annotate: Any = None) -> str:
        """The text format with ``#[version = "0.0.5"]`` and, if asked, the metadata
        section that carries constant data (so :func:`passhost.ir.parse` can read it back).
        ``annotate(expr)``, as TVM's, gives the text written after each expression instead
        of its ``/* ty=... */`` (see :func:`passhost.ir.printer.astext`)."""
        from .printer import astext

        return astext(self, show_meta_data=show_meta_data, annotate=annotate)

    def __repr__(self) -> str:
        return f"IRModule({', '.join('@' + g.name_hint for g in self.get_global_vars())})"
