"""The ``report`` instrument: what happened to every scheduled pass.

One :class:`PassReport` per pass the pass manager considered, in the order it considered
them, nested passes under their parent::

    with PassContext(opt_level=1, disabled_pass=["EliminateCommonSubexpr"], instruments=[report]):
        passhost.pipeline("FoldConstant,EliminateCommonSubexpr,FuseOps")(mod)
    print(report.render())

prints (times vary)::

    #  PASS                     STATUS   REASON            CHANGED  TIME ms  OPS
    0  sequential               ran      direct            yes        1.204  5 -> 3 (-2)
    1    FoldConstant           skipped  opt_level         -              -  -
    2    EliminateCommonSubexpr skipped  disabled          -              -  -
    3    InferType              ran      required by FuseOps no       0.101  5 -> 5 (+0)
    4    FuseOps                ran      opt_level         yes        0.870  5 -> 3 (-2)

Why a pass did **not** run (``status == "skipped"``):

``opt_level``
    its ``opt_level`` is above the context's and it is not in ``required_pass``
``disabled``
    its name is in ``disabled_pass``
``should_run``
    an instrument's ``should_run`` returned False

These come from the pass manager's optional ``on_pass_skipped(info, reason)`` method.
Why a pass **ran** (``status == "ran"``):

``opt_level``
    its ``opt_level`` is at most the context's
``required_pass``
    forced by the context's ``required_pass`` although its ``opt_level`` is higher
``required by NAME``
    run first because pass ``NAME`` lists it in ``PassInfo.required``
``direct``
    called directly, outside any pass (a direct call ignores ``opt_level``)

``status == "failed"`` means the pass raised (it started and never finished).
``changed`` compares the input and output modules: the same object or the same
function objects mean unchanged, otherwise their structural hashes decide. The wall
time of a pass includes its nested passes (and this instrument's own bookkeeping for
them: an op count and a structural hash per nested pass).
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any, Optional

from passhost import ir
from passhost.instrument import PassInstrument
from passhost.transform import PassContext

__all__ = ["PassReport", "ReportInstrument", "module_op_count", "module_changed"]


@dataclass
class PassReport:
    """What happened to one scheduled pass (see the module docstring for the reasons).

    :ivar index: position in the report (the order the pass manager considered passes)
    :ivar parent: index of the enclosing pass, or None at the top
    :ivar wall_ms: wall time in milliseconds, None when it did not finish
    :ivar ops_before: number of operator calls in the module before the pass
    :ivar ops_after: ... and after it (None when it did not finish)
    :ivar rules: for a pass made of rules, ``{rule: {"tried", "matched", "rewritten"}}`` in
        this run (from ``PassContext.rule_stats``), else None
    """

    index: int
    name: str
    depth: int
    opt_level: int
    status: str
    reason: str
    parent: Optional[int] = None
    changed: Optional[bool] = None
    wall_ms: Optional[float] = None
    ops_before: Optional[int] = None
    ops_after: Optional[int] = None
    rules: Optional[dict] = None

    @property
    def op_delta(self) -> Optional[int]:
        if self.ops_before is None or self.ops_after is None:
            return None
        return self.ops_after - self.ops_before

    def as_dict(self) -> dict:
        d = asdict(self)
        d["op_delta"] = self.op_delta
        return d


def module_op_count(mod: Any, cache: Optional[dict] = None) -> int:
    """The number of operator calls in every function of ``mod``.

    :param cache: ``{id(function): (function, count)}`` reused across calls, so functions
        a pass left alone are not walked again
    """
    total = 0
    for _, func in mod.items():
        hit = cache.get(id(func)) if cache is not None else None
        if hit is not None and hit[0] is func:
            total += hit[1]
            continue
        n = sum(ir.count_ops(func).values())
        if cache is not None:
            cache[id(func)] = (func, n)
        total += n
    return total


#: whether a pass changed the module (kept here: part of this plugin's API)
module_changed = ir.module_changed


def _rule_counts(info: Any) -> dict:
    return {r: dict(c) for r, c in PassContext.current().rule_stats.get(info.name, {}).items()}


class _Frame:
    __slots__ = ("entry", "mod", "t0", "children", "rules_before")

    def __init__(self, entry: PassReport, mod: Any, t0: float) -> None:
        self.entry = entry
        self.mod = mod
        self.t0 = t0
        self.children: list = []
        self.rules_before: dict = {}


class ReportInstrument(PassInstrument):
    """Record every scheduled pass: ran or skipped and why, changed?, wall time, op-count delta.

    The records survive leaving the context (read them after the ``with`` block); they
    are cleared when the instrument enters a context again.

    :param count_ops: count operator calls before and after each pass (linear in the
        module size; ``False`` leaves ``ops_before``/``ops_after`` as None)
    """

    name = "report"

    def __init__(self, count_ops: bool = True) -> None:
        if not isinstance(count_ops, bool):
            raise TypeError(f"report: count_ops must be True or False, got {count_ops!r}")
        self.count_ops = count_ops
        self.passes: list = []
        self._stack: list = []
        self._roots: list = []
        self._op_cache: dict = {}

    # -- the protocol -------------------------------------------------------------------
    def enter_pass_ctx(self) -> None:
        self.passes = []
        self._stack = []
        self._roots = []
        self._op_cache = {}

    def exit_pass_ctx(self) -> None:
        self._stack = []  # unfinished entries stay "failed"
        self._op_cache = {}

    def _new(self, info: Any, status: str, reason: str) -> PassReport:
        stack = self._stack
        parent = stack[-1] if stack else None
        entry = PassReport(len(self.passes), info.name, len(stack), info.opt_level, status, reason,
                           parent.entry.index if parent else None)
        self.passes.append(entry)
        (parent.children if parent else self._roots).append(entry)
        return entry

    def on_pass_skipped(self, info: Any, reason: str) -> None:
        """Called by the pass manager for a pass it did not run."""
        self._new(info, "skipped", reason)

    def run_before_pass(self, mod: Any, info: Any) -> None:
        ctx = PassContext.current()
        if info.name in ctx.required_pass and info.opt_level > ctx.opt_level:
            reason = "required_pass"
        elif not self._stack:
            reason = "direct"
        else:
            reason = "opt_level"
        siblings = self._stack[-1].children if self._stack else self._roots
        required = info.required
        if required and len(siblings) >= len(required):
            tail = siblings[len(siblings) - len(required):]
            if all(e.name == r and e.status == "ran" for e, r in zip(tail, required)):
                for e in tail:
                    e.reason = f"required by {info.name}"
        entry = self._new(info, "failed", reason)
        if self.count_ops:
            entry.ops_before = module_op_count(mod, self._op_cache)
        frame = _Frame(entry, mod, time.perf_counter())
        frame.rules_before = _rule_counts(info)
        self._stack.append(frame)

    def run_after_pass(self, mod: Any, info: Any) -> None:
        t1 = time.perf_counter()
        if not self._stack:
            return
        frame = self._stack.pop()
        entry = frame.entry
        entry.wall_ms = (t1 - frame.t0) * 1e3
        entry.status = "ran"
        entry.changed = module_changed(frame.mod, mod)
        after = _rule_counts(info)
        if after:
            zero = {"tried": 0, "matched": 0, "rewritten": 0}
            entry.rules = {r: {k: c[k] - frame.rules_before.get(r, zero)[k] for k in zero} for r, c in after.items()}
        if self.count_ops:
            entry.ops_after = entry.ops_before if not entry.changed else module_op_count(mod, self._op_cache)

    # -- results --------------------------------------------------------------------------
    def summary(self) -> dict:
        """Counts: passes that ran, changed the module, failed, and skipped per reason."""
        skipped: dict = {}
        for e in self.passes:
            if e.status == "skipped":
                skipped[e.reason] = skipped.get(e.reason, 0) + 1
        return {
            "ran": sum(e.status == "ran" for e in self.passes),
            "changed": sum(bool(e.changed) for e in self.passes),
            "failed": sum(e.status == "failed" for e in self.passes),
            "skipped": dict(sorted(skipped.items())),
        }

    def as_dict(self) -> dict:
        """``{"passes": [record dicts], "summary": summary()}`` (JSON-ready)."""
        return {"passes": [e.as_dict() for e in self.passes], "summary": self.summary()}

    def render(self) -> str:
        """The report as a table (empty when no pass was scheduled)."""
        if not self.passes:
            return ""
        rows = [("#", "PASS", "STATUS", "REASON", "CHANGED", "TIME ms", "OPS")]
        for e in self.passes:
            changed = "-" if e.changed is None else ("yes" if e.changed else "no")
            wall = "-" if e.wall_ms is None else f"{e.wall_ms:.3f}"
            if e.op_delta is None:
                ops = "-" if e.ops_before is None else f"{e.ops_before} -> ?"
            else:
                ops = f"{e.ops_before} -> {e.ops_after} ({e.op_delta:+d})"
            rows.append((str(e.index), "  " * e.depth + e.name, e.status, e.reason, changed, wall, ops))
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        lines = []
        for r in rows:
            cells = [c.rjust(w) if i == 5 else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))]
            lines.append("  ".join(cells).rstrip())
        ruled = [e for e in self.passes if e.rules]
        if ruled:
            lines.append("")
            lines.append("rules (tried / matched / rewritten):")
            for e in ruled:
                for name, c in e.rules.items():
                    lines.append(f"  {e.index}  {e.name}/{name}  {c['tried']} / {c['matched']} / {c['rewritten']}")
        return "\n".join(lines) + "\n"
