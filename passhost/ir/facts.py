"""Facts the host remembers about IR, in one place, each with the reason it cannot go stale.

Nodes are immutable and compared by identity, and a node's ``checked_type``, once set,
never changes. So a fact computed from a node is true of that node for as long as it
lives, and a weak reference forgets it when the node goes: none of these memos can change
a result, only skip work whose result is already known.

* :data:`OPS_EVER_CALLED` -- every operator some ``Call`` of this process was built with
  (``Call.__init__`` records it; ``Call.with_args`` copies an existing call's operator).
  An operator not in it is called by no graph at all, so ``ir.calls_any`` answers "no"
  for it without a walk. Only ever grows.
* :data:`CALLED_OPS` -- per function (weakly): the operators its body calls, computed by
  one walk on the first ``ir.calls_any`` question about it, or by the pattern driver
  from the post-order of its first sweep (``pattern.needs``: a function none of a rule
  set's rules can match is returned without a sweep).
* :func:`fixed_points` -- per pass that declares itself *idempotent* (``PassInfo``'s
  ``idempotent=True``, e.g. FoldConstant) and per set of options: the typed functions it
  returned. Idempotence means ``p(p(f))`` is ``p(f)`` itself, so a function ``p``
  returned comes back from ``p`` unchanged and the pass manager hands it back without
  calling the pass. A typed result only: type inference could later type an untyped
  result's nodes in place and give the pass new work (a ``shape_of`` to fold).

  Before / after (FoldConstant twice, as FoldScaleAxis's trailing FoldConstant runs it
  on a function -O3 folded already)::

      FoldConstant(FoldConstant(mod))   # the second call: no walk, the same function
"""
from __future__ import annotations

import weakref
from typing import Any

__all__ = ["OPS_EVER_CALLED", "CALLED_OPS", "fixed_points"]

#: operators some Call of this process was built with (see the module docs)
OPS_EVER_CALLED: set = set()

#: function -> frozenset of the operators it calls (weak keys; see the module docs)
CALLED_OPS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()

_FIXED: dict = {}


def fixed_points(key: Any) -> "weakref.WeakSet":
    """The functions an idempotent pass returned, for ``key`` = (pass name, its options)."""
    done = _FIXED.get(key)
    if done is None:
        done = _FIXED[key] = weakref.WeakSet()
    return done
