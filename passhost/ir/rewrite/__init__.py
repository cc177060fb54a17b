"""The rewrite engine: rule tables, the one walk, the typing policies and the use analysis.

A pass that rewrites the IR is a table of rules over the walk::

    from passhost import ir
    from passhost.ir.rewrite import KEEP_TYPES, RuleTable, walk

    rules = RuleTable()

    @rules.on("negative")
    def double_negation(call):          # negative(negative(%x)) -> %x
        inner = call.args[0]
        if type(inner) is ir.Call and inner.op is call.op:
            return inner.args[0]
        return None

    walk(fn, rules, KEEP_TYPES)

* :class:`RuleTable` (:mod:`.table`) -- rules by what they can be rooted at (operators,
  node classes); it builds the dispatch the walk reads, once.
* :func:`walk` (:mod:`.walk`) -- the bottom-up rebuild every rewriting pass runs on:
  children first, sharing and identity kept, each node offered to its rule.
* :mod:`.typing_policy` -- ``NO_TYPES``, ``KEEP_TYPES``, ``like_originals(mod)``: what a
  rewrite writes into ``checked_type``, the one place that decides it.
* :func:`dataflow`, :func:`use_counts` (:func:`count_uses_into`), :func:`binding_uses` (:mod:`.dataflow`,
  :mod:`.binding_uses`) -- who uses each node, remembered per function while a pass runs;
  :class:`NamedValues` (:mod:`.named`) is the same question for graphs of named values
  (ONNX's node lists).
* :func:`rewrite_post_order` (:mod:`.driver`) -- the walk behind one function with keyword
  arguments, the engine's older spelling (``passhost.ir.rewrite_post_order``).

The pattern language (:mod:`passhost.ir.pattern`) builds a :class:`RuleTable` from
``DFPatternCallback`` rules and drives this walk to a fixed point. See ``docs/rewrite.md``.
"""
from __future__ import annotations

from .binding_uses import binding_uses
from .dataflow import LEAVES, Dataflow, UseCounts, count_uses_into, dataflow, use_counts
from .driver import rewrite_post_order
from .named import NamedValues
from .table import RuleTable
from .typing_policy import KEEP_TYPES, NO_TYPES, Typing, like_originals
from .walk import walk

__all__ = [
    "RuleTable", "walk", "rewrite_post_order",
    "Typing", "NO_TYPES", "KEEP_TYPES", "like_originals",
    "Dataflow", "UseCounts", "dataflow", "use_counts", "count_uses_into", "binding_uses", "LEAVES", "NamedValues",
]
