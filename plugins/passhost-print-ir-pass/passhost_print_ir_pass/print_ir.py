"""PrintIR: print the module to stderr and hand it on unchanged (TVM's ``transform.PrintIR``).

Insert it in a :class:`~passhost.transform.Sequential` after the pass whose effect you
want to see. The text is ``PrintIR(<header>):`` on one line followed by the module in
the text format with its ``#[version = "0.0.5"]`` header (:meth:`IRModule.astext`);
constant data is included only with ``show_meta_data=True``.

Before and after are the same module; stderr receives, for
``Sequential([FoldConstant(), PrintIR("after fold")])``::

    PrintIR(after fold):
    #[version = "0.0.5"]
    def @main(%x: Tensor[(1, 2, 3), float32] /* ty=Tensor[(1, 2, 3), float32] */) -> Tensor[(1, 2, 3), float32] {
      %0 = add(%x, meta[relay.Constant][0] /* ty=Tensor[(3), float32] */) /* ty=Tensor[(1, 2, 3), float32] */;
      add(%0, meta[relay.Constant][1] /* ty=Tensor[(3), float32] */) /* ty=Tensor[(1, 2, 3), float32] */
    }
"""
from __future__ import annotations

import sys
from typing import Any, Optional, TextIO

from passhost.errors import PassError
from passhost.ir import IRModule
from passhost.transform import module_pass

__all__ = ["print_ir_text", "print_ir", "PrintIR"]


def print_ir_text(mod: IRModule, header: str = "", show_meta_data: bool = False) -> str:
    """The text PrintIR writes for ``mod`` (ends with a newline)."""
    if len(mod):
        body = mod.astext(show_meta_data=show_meta_data)
    else:
        body = repr(mod)
    if not body.endswith("\n"):
        body += "\n"
    return f"PrintIR({header}):\n{body}"


def print_ir(mod: IRModule, header: str = "", show_meta_data: bool = False,
             file: Optional[TextIO] = None) -> IRModule:
    """Write :func:`print_ir_text` to ``file`` (default ``sys.stderr``); return ``mod``."""
    out = sys.stderr if file is None else file
    out.write(print_ir_text(mod, header, show_meta_data))
    out.flush()
    return mod


@module_pass(opt_level=0, name="PrintIR", preserves_types=True)
class PrintIR:
    """Print the module to stderr (``PrintIR(<header>):`` + its text) and return it unchanged.

    Module pass, ``opt_level`` 0. The module after is the module before; stderr gets::

        PrintIR(<header>):
        #[version = "0.0.5"]
        def @main(...) { ... }

    :param header: shown between the parentheses of the first line
    :param show_meta_data: also print the metadata section (constant data)
    """

    def __init__(self, header: str = "", show_meta_data: bool = False) -> None:
        if not isinstance(header, str):
            raise PassError(f"PrintIR: header must be a string, got {header!r}", "PrintIR")
        if not isinstance(show_meta_data, bool):
            raise PassError(f"PrintIR: show_meta_data must be True or False, got {show_meta_data!r}",
                            "PrintIR")
        self.header = header
        self.show_meta_data = show_meta_data

    def transform_module(self, mod: IRModule, ctx: Any) -> IRModule:
        return print_ir(mod, self.header, self.show_meta_data)
