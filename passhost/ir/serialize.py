"""``passhost.ir.load`` / ``passhost.ir.save``: modules from and to files.

The format is chosen by the file suffix (``.txt``/``.relay``: the host's text format;
``.onnx``: the ``passhost-onnx`` plugin) unless ``format=`` names it. Formats other than
text come from plugins (hook ``passhost_register_formats``), which live above this
package; :mod:`passhost.registry` installs the dispatcher at import (the same inversion
:mod:`passhost.transform` uses for ``required`` passes).

::

    mod = ir.load("resnet50.onnx", input_shapes={"data": (1, 3, 224, 224)})
    ir.save(mod, "resnet50.opt.onnx", opset=17)
    ir.save(mod, "resnet50.txt")          # the text format: def @main(%data: ...) { ... }
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, Optional

from ..errors import ParseError, UsageError
from .module import IRModule
from .parser import parse
from .printer import astext

__all__ = ["load", "save", "load_text", "save_text", "set_dispatcher"]

_dispatch: Optional[tuple] = None


def set_dispatcher(load_fn: Callable[..., Any], save_fn: Callable[..., Any]) -> None:
    """Install the functions that pick a format and call it (done by :mod:`passhost.registry`)."""
    global _dispatch
    _dispatch = (load_fn, save_fn)


def load(path: str, *, format: Optional[str] = None, input_shapes: Optional[Mapping] = None,
         keep_params: bool = False, **options: Any) -> Any:
    """Read the module in ``path``.

    :param format: a format name (``"text"``, ``"onnx"``); default: by suffix
    :param input_shapes: input name -> concrete shape, binding symbolic dimensions
    :param keep_params: keep weights as parameters of ``@main`` and return
        ``(mod, params)``; otherwise weights become constants and the module is returned
    :param options: options of the format's reader, passed on as given (``keep_ops=`` for
        ONNX: standard operators to keep as they are); a format that does not take one
        says so
    :raises FormatError: no installed format reads ``path``, or the file is malformed
    """
    if _dispatch is None:  # pragma: no cover - passhost/__init__ always imports the registry
        return load_text(path, input_shapes=input_shapes, keep_params=keep_params, **options)
    return _dispatch[0](path, format=format, input_shapes=input_shapes, keep_params=keep_params, **options)


def save(mod: IRModule, path: str, *, format: Optional[str] = None, **options: Any) -> Any:
    """Write ``mod`` to ``path`` atomically, in the format its suffix (or ``format``) names.

    ``options`` go to the format (text: ``show_meta_data``; onnx: ``opset``, ...). Returns
    what the format's writer returns: ``None``, or a list of notes on the written file (the
    ONNX writer's say which ``Shape`` nodes a model with dynamic axes keeps, and why).
    """
    if _dispatch is None:  # pragma: no cover
        return save_text(mod, path, **options)
    return _dispatch[1](mod, path, format=format, **options)


def load_text(path: str, *, input_shapes: Optional[Mapping] = None, keep_params: bool = False) -> Any:
    """The text format's loader (``def @main(...) { ... }``)."""
    if input_shapes:
        raise UsageError(f"{path!r} is a text-format module, whose inputs are typed in the text; "
                         "input shapes apply to model formats such as onnx")
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as err:
        raise UsageError(f"cannot read {path!r}: {err.strerror or err}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        column = err.start - (data.rfind(b"\n", 0, err.start) + 1) + 1
        shown = data[max(0, data.rfind(b"\n", 0, err.start) + 1):err.start].decode("utf-8", "replace")
        raise ParseError(f"byte 0x{data[err.start]:02x} is not UTF-8 text (a text-format module is UTF-8; is "
                         "this a binary model? give its format with --from, or the suffix that names it)",
                         line, column, shown, path) from None
    if "\r" in text:  # universal newlines, as a text-mode open() reads them
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    mod = parse(text, source_name=path)
    return (mod, {}) if keep_params else mod


def save_text(mod: IRModule, path: str, *, show_meta_data: bool = True) -> None:
    """The text format's writer."""
    from ..io import write_text_atomic

    text = astext(mod, show_meta_data=show_meta_data)
    if not text.endswith("\n"):
        text += "\n"
    try:
        write_text_atomic(path, text)
    except OSError as err:
        raise UsageError(f"cannot write {path!r}: {err.strerror or err}") from None
