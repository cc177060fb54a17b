"""Programs nested one construct N deep, as text (issue 38 §3): the depth cases of
``tests/test_deep_text.py`` and of ``benchmarks/bench_nesting.py``.

Each builder takes the depth ``n`` and returns a module's text that parses, types and
prints at any depth, at the default recursion limit. ``tuples(2)``::

    def @main(%x: float32) {
      ((%x,),)
    }

:data:`DEEP_FAMILIES` maps each builder's name to it: tuples, tuple types, projections,
functions (with and without parameters, called in place), lets (nested values, chains,
tuple-typed chains) and ifs (in branches, in conditions, choosing between tuples).
"""
from __future__ import annotations

__all__ = ["DEEP_FAMILIES"]

H = '#[version = "0.0.5"]\n'


def tuples(n):
    return H + "def @main(%x: float32) {\n  " + "(" * n + "%x" + ",)" * n + "\n}\n"


def tuple_type(n):
    return H + "def @main(%x: " + "(" * n + "float32" + ",)" * n + ") {\n  %x\n}\n"


def projections(n):
    return H + "def @main(%x: " + "(" * n + "float32" + ",)" * n + ") {\n  %x" + ".0" * n + "\n}\n"


def functions(n):
    return H + "def @main(%x: float32) {\n  " + "fn () {\n" * n + "%x" + "}\n" * n + "}\n"


def closures(n):
    heads = "".join(f"fn (%a{i}: float32) {{\n" for i in range(n))
    return H + "def @main(%x: float32) {\n  " + heads + "add(%x, %a0)" + "}\n" * n + "}\n"


def calls(n):
    heads = "".join(f"fn (%a{i}: float32) {{\n" for i in range(n))
    tails = "".join(f"}}(%a{i - 1})\n" if i else "}(%x)\n" for i in reversed(range(n)))
    return H + "def @main(%x: float32) {\n  " + heads + "%x" + tails + "}\n"


def lets(n):  # each let's value is the next let
    values = "".join(f"let %v{i} = {{\n" for i in range(n))
    bodies = "".join(f"}};\n%v{i}" for i in reversed(range(n)))
    return H + "def @main(%x: float32) {\n  " + values + "%x" + bodies + "\n}\n"


def let_chain(n):
    lines = "".join(f"  let %v{i} = add(%{'x' if i == 0 else f'v{i - 1}'}, 1f);\n" for i in range(n))
    return H + "def @main(%x: float32) {\n" + lines + f"  %v{n - 1}\n}}\n"


def let_tuples(n):  # a chain whose let variables have ever deeper tuple types
    lines = "".join(f"  let %t{i} = (%{'x' if i == 0 else f't{i - 1}'},);\n" for i in range(n))
    return H + "def @main(%x: float32) {\n" + lines + f"  %t{n - 1}\n}}\n"


def ifs(n):
    return H + "def @main(%x: float32, %c: bool) {\n  " + "if (%c) {\n" * n + "%x" + "} else {\n%x\n}\n" * n + "}\n"


def if_conditions(n):
    return H + "def @main(%c: bool) {\n  " + "if (\n" * n + "%c" + ") { %c } else { %c }\n" * n + "}\n"


def if_tuples(n):  # ifs choosing between ever deeper tuples
    lines = "".join(f"  %{i + 1} = if (%c) {{ (%{i},) }} else {{ (%{i},) }};\n" for i in range(n))
    return H + "def @main(%x: float32, %c: bool) {\n  %0 = (%x,);\n" + lines + f"  %{n}\n}}\n"


#: name -> builder, in the order above
DEEP_FAMILIES = {f.__name__: f for f in (tuples, tuple_type, projections, functions, closures, calls, lets,
                                         let_chain, let_tuples, ifs, if_conditions, if_tuples)}
