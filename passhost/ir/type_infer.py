"""Type inference: give every expression its ``checked_type``.

:func:`infer_type` walks an expression (or every function of a module) bottom-up
with an explicit stack, so a 100,000-deep chain needs no Python recursion. Each
node is typed once, through ``node._set_checked_type(t)``; the walk stops at
nodes that already have a type (a typed node has typed children), so running
inference again after a pass only types the nodes that pass built::

    def @main(%x: Tensor[(1, 3), float32]) {          # before
      add(%x, %x)
    }
    def @main(%x: Tensor[(1, 3), float32]) -> Tensor[(1, 3), float32] {   # after
      add(%x, %x) /* ty=Tensor[(1, 3), float32] */
    }

Rules:

* ``Var``: its annotation. A variable without one is filled in by the type
  relation of the first operator call that consumes it (the relation receives
  ``None`` for it and may write the type into its ``arg_types`` list), by the
  parameter type of a function it is passed to, or by the value of the ``let``
  that binds it. The filled type becomes the variable's annotation too (as TVM's
  ``InferType`` does). A variable nothing determines is an error.
* ``Constant``: ``Tensor[data.shape, dtype]``.
* ``Call`` of an operator: ``op.type_rel(arg_types, attrs)``; errors name the op.
  ``Call`` of anything else (function literal, closure variable, global): the
  argument types must equal the callee's ``FuncType`` parameters; the result is
  its return type.
* ``Tuple`` → ``TupleType``; ``TupleGetItem`` → the field's type.
* ``Let`` → the body's type; ``If`` → the (equal) type of both branches, its
  condition a rank-0 tensor.
* ``Function`` → ``FuncType(param types, body type)``; a missing ``ret_type`` is
  filled in, a given one must match the body.
* ``GlobalVar`` → the type of its function in the module. Callees are typed
  first. A function that calls itself needs annotated parameters; its return type,
  if not annotated, is read off its non-recursive branches as TVM's solver does: the
  function is typed once with the recursive calls returning an ``IncompleteType``
  (``if`` takes the type of the other branch, an operator or a call given one returns
  one), then again with that return type, which the recursive branches must agree with.
* A called variable without a type (``fn (%x: int32, %f) -> int32 { %f(%x) }``) gets
  ``fn (argument types) -> T`` when the type ``T`` its call must have is known from
  the enclosing function's return annotation (through ``let`` bodies and ``if``
  branches).
"""
from __future__ import annotations

from typing import Callable, Optional, Union

from ..errors import PasshostError, TypeInferenceError
from ._gc import paused
from .expr import USES_OF as _USES_OF
from .expr import Call, Constant, Expr, Function, GlobalVar, If, Let, Tuple, TupleGetItem, Var
from .module import IRModule
from .op import Op
from .dims import ANY
from .types import FuncType, IncompleteType, TensorType, TupleType, Type, has_incomplete

__all__ = ["infer_type"]

_Resolver = Callable[[GlobalVar], FuncType]

#: (shape, numpy dtype) -> the TensorType of a constant. numpy's ``dtype.name`` is a slow
#: Python property, and the constants of one shape and dtype can share one (immutable)
#: type: a parsed 100k-node chain has 100k scalar constants. Bounded in size.
_CONST_TYPES: dict = {}


def _constant_type(data) -> TensorType:
    key = (data.shape, data.dtype)
    ty = _CONST_TYPES.get(key)
    if ty is None:
        ty = TensorType(data.shape, data.dtype.name)
        if len(_CONST_TYPES) < 4096:
            _CONST_TYPES[key] = ty
    return ty


#: the stand-in return type of a recursive function while its return type is inferred
_INCOMPLETE = IncompleteType()


class _NeedReturnType(Exception):
    """Internal: ``gv`` calls itself and has no return annotation; infer it from its other branches."""

    def __init__(self, gv: GlobalVar) -> None:
        super().__init__(gv.name_hint)
        self.gv = gv


class _NeedGlobal(Exception):
    """Internal: the function of ``gv`` must be typed before the current one."""

    def __init__(self, gv: GlobalVar) -> None:
        super().__init__(gv.name_hint)
        self.gv = gv


def infer_type(obj: Union[IRModule, Expr], mod: Optional[IRModule] = None) -> Union[IRModule, Expr]:
    """Type ``obj``.

    :param obj: an :class:`IRModule` (every function is typed; a shallow copy of the
        module holding the same, now typed, function objects is returned) or an
        expression (typed in place and returned)
    :param mod: the module an expression belongs to: its calls of global functions
        (``@g0(%x)``) take their types from it (its functions are typed first when they
        are not yet). Without it an expression that names a global cannot be typed; a
        pass that types what it builds passes the module it runs on::

            infer_type(Call(GlobalVar("g0"), [x]), mod=mod)   # @g0(%x) /* ty=... */
    :raises TypeInferenceError: on a shape or dtype mismatch, an untypable variable,
        a bad tuple index, a recursive function without annotations, ...
    """
    if isinstance(obj, IRModule):
        with paused():
            _infer_module(obj)
        return obj.copy()
    if isinstance(obj, Expr):
        if type(obj) is Op:
            raise TypeInferenceError(f"cannot infer the type of operator {obj.name} on its own: "
                                     "type a call of it instead")
        if obj._checked_type is None:
            t = type(obj)
            if t is Call and type(obj.op) is Op and all(a._checked_type is not None for a in obj.args):
                # one operator call over typed arguments, as an importer builds a graph node by
                # node: run its relation directly (no traversal, no GC pause per node)
                try:
                    _set_type(obj, _relate(obj.op, [a._checked_type for a in obj.args], obj.attrs))
                except TypeInferenceError as err:
                    err.node = obj
                    _name_span(err, obj)
                    raise
                return obj
            resolve = _no_module if mod is None else _in_module(mod)
            if (t is Constant or t is Var) and not _leaf(obj, resolve) and obj._checked_type is not None:
                return obj
            with paused():
                _infer_expr(obj, resolve)
        return obj
    raise TypeInferenceError(
        f"infer_type needs an IRModule or an expression, got {type(obj).__name__}")


# ---------------------------------------------------------------------------
# modules


def _signature(fn: Function) -> Optional[FuncType]:
    """The declared type of ``fn`` when its parameters and return type are all annotated."""
    if fn.ret_type is None:
        return None
    anns = []
    for p in fn.params:
        if p.type_annotation is None:
            return None
        anns.append(p.type_annotation)
    return FuncType(anns, fn.ret_type)


def _lookup(mod: IRModule, gv: GlobalVar) -> tuple:
    """``(the module's own GlobalVar, its function)``, or ``(None, None)`` if undefined.

    A GlobalVar object that is not the module's key but has the same name (e.g. built
    by hand) refers to the same function.
    """
    funcs = mod._funcs
    fn = funcs.get(gv)
    if fn is not None:
        return gv, fn
    own = mod._by_name.get(gv.name_hint)
    if own is None:
        return None, None
    return own, funcs[own]


def _infer_module(mod: IRModule) -> None:
    items = list(mod.items())
    # A GlobalVar keeps the type of the function it named when it was last typed;
    # functions replaced since then must be looked up again.
    for gv, fn in items:
        ft = fn._checked_type
        if ft is not None:
            if gv._checked_type != ft:
                gv._set_checked_type(ft)
        elif gv._checked_type is not None:
            gv._set_checked_type(None)  # stale: its function changed
    typing = _ModuleTyping(mod)
    for gv, fn in items:
        if fn._checked_type is None:
            typing.infer(gv)


class _ModuleTyping:
    """The functions of one module typed in the order their calls need them: a function
    calling a global not yet typed is set aside until that one is (an explicit work
    stack, no recursion), and a recursive one gets its return type from the branches that
    do not recurse (a *probe*) before it is typed again."""

    def __init__(self, mod: IRModule) -> None:
        self.mod = mod
        self.in_progress: set = set()
        self.memo: dict = {}  # type relation results, shared by every function of the module
        self.provisional: dict = {}  # recursive global -> its signature with the inferred return type
        self.probing: Optional[tuple] = None  # (global, signature returning IncompleteType) while one is probed

    def infer(self, gv: GlobalVar) -> None:
        """Type ``gv``'s function and, first, every global it needs."""
        mod, in_progress = self.mod, self.in_progress
        work = [gv]
        while work:
            g = work[-1]
            f = mod._funcs[g]
            if f._checked_type is not None:
                work.pop()
                in_progress.discard(g)
                continue
            in_progress.add(g)
            try:
                _infer_expr(f, self.resolve, name=g.name_hint, memo=self.memo)
            except _NeedGlobal as need:
                work.append(need.gv)
                continue
            except _NeedReturnType as need:
                self.provisional[need.gv] = self.probe_return_type(need.gv)
                continue  # type it again, the recursive calls now typed
            g._set_checked_type(f._checked_type)
            in_progress.discard(g)
            work.pop()

    def resolve(self, gv: GlobalVar) -> FuncType:
        """The type of a call's global: known, provisional (recursion), or raise for the
        work stack (:class:`_NeedGlobal`, :class:`_NeedReturnType`)."""
        own, fn = _lookup(self.mod, gv)
        if fn is None:
            names = ", ".join("@" + g.name_hint for g in self.mod.get_global_vars()) or "none"
            raise TypeInferenceError(
                f"@{gv.name_hint} is not defined in the module (functions: {names}): add it "
                "to the module or call an existing function")
        ft = fn._checked_type
        if ft is None:
            ft = _signature(fn) or self.provisional.get(own)
            if ft is None:
                probe = self.probing
                if probe is not None and probe[0] is own:
                    ft = probe[1]  # the recursive call, while its return type is read off the rest
                    gv._set_checked_type(ft)  # taken back with the rest of the probe
                    return ft
                if own in self.in_progress:
                    if probe is not None or all(p.type_annotation is not None for p in fn.params):
                        raise _NeedReturnType(own)  # (inside a probe: mutual recursion, an error)
                    raise _recursion_error(gv.name_hint)
                raise _NeedGlobal(own)
        gv._set_checked_type(ft)
        return ft

    def probe_return_type(self, own: GlobalVar) -> FuncType:
        """The signature of recursive ``own`` with the return type its non-recursive branches give."""
        fn = self.mod._funcs[own]
        ptypes = [p.type_annotation for p in fn.params]
        self.probing = (own, FuncType(ptypes, _INCOMPLETE))
        try:
            _infer_expr(fn, self.resolve, name=own.name_hint, memo={})
        except (_NeedGlobal, _NeedReturnType) as need:  # mutual recursion: located at the call
            from .visitor import post_order

            err = _recursion_error(own.name_hint)
            err.node = next((n for n in post_order(fn) if type(n) is Call and type(n.op) is GlobalVar
                             and n.op.name_hint == need.gv.name_hint), None)
            raise err from None
        finally:
            self.probing = None
            body_type = fn.body._checked_type
            _forget_incomplete(fn)
        if body_type is None or has_incomplete(body_type):
            err = TypeInferenceError(
                f"@{own.name_hint} calls itself on every path, so no branch gives its return type: "
                "annotate its return type")
            err.node = fn  # located at its definition
            _name_span(err, fn)
            raise err
        return FuncType(ptypes, body_type)


def _name_span(err: TypeInferenceError, node: Expr) -> None:
    """Append where ``node`` came from (its :class:`~passhost.ir.Span`) to the message."""
    span = node.span
    if span is not None and err.args and isinstance(err.args[0], str):
        err.args = (f"{err.args[0]} (at {span})",) + err.args[1:]


def _recursion_error(name: str) -> TypeInferenceError:
    return TypeInferenceError(
        f"@{name} calls itself (directly or through other functions): annotate its parameter "
        "types (and, for mutual recursion, the return type) so the recursive call can be typed")


def _forget_incomplete(fn: Function) -> None:
    """Undo what a return-type probe wrote into ``fn``: its own type and return type, and
    every type, annotation and return type that holds the incomplete stand-in (the rest was
    typed without it and is what the real inference computes again). A node over a reset
    one is reset too -- an ``if`` typed by its other branch, say -- so that every typed node
    keeps typed children."""
    from .visitor import children, post_order

    _set_type(fn, None)
    fn._set_ret_type(None)
    reset: set = set()
    for node in post_order(fn):
        t = node._checked_type
        if t is not None and (has_incomplete(t) or any(id(c) in reset for c in children(node))):
            _set_type(node, None)
            reset.add(id(node))
        tn = type(node)
        if tn is Var:
            ann = node.type_annotation
            if ann is not None and has_incomplete(ann):
                _set_annotation(node, None)
        elif tn is Function and node.ret_type is not None and has_incomplete(node.ret_type):
            node._set_ret_type(None)


def _in_module(mod: IRModule) -> _Resolver:
    """Types of globals for an expression of ``mod``: its functions' (typed if need be)."""

    def resolve(gv: GlobalVar) -> FuncType:
        _, fn = _lookup(mod, gv)
        if fn is None:
            names = ", ".join("@" + g.name_hint for g in mod.get_global_vars()) or "none"
            raise TypeInferenceError(f"@{gv.name_hint} is not defined in the module (functions: {names})")
        if fn._checked_type is None:
            _infer_module(mod)
        gv._set_checked_type(fn._checked_type)
        return fn._checked_type

    return resolve


def _no_module(gv: GlobalVar) -> FuncType:
    raise TypeInferenceError(
        f"cannot type @{gv.name_hint} outside a module: run infer_type on the IRModule "
        "that defines it")


# ---------------------------------------------------------------------------
# expressions


def _untyped_var(var: Var, role: str = "") -> TypeInferenceError:
    what = f" ({role})" if role else ""
    return TypeInferenceError(
        f"cannot infer the type of %{var.name_hint}{what}: nothing determines it, so annotate "
        f"it (e.g. ir.var({var.name_hint!r}, shape=(...), dtype=\"float32\"))")


def _where(node: Function, root: Expr, name: Optional[str]) -> str:
    if node is root and name is not None:
        return f"@{name}"
    return "a function"


def _callee_name(op: Expr) -> str:
    t = type(op)
    if t is GlobalVar:
        return f"@{op.name_hint}"
    if t is Var:
        return f"%{op.name_hint}"
    return "a function"


def _leaf(node: Expr, resolve: _Resolver) -> bool:
    """Type ``node`` on the spot if it is a leaf; ``True`` if it must be pushed."""
    if node._checked_type is not None:
        return False
    t = type(node)
    if t is Var:
        ann = node.type_annotation
        if ann is not None:
            node._set_checked_type(ann)
        return False
    if t is Constant:
        node._set_checked_type(_constant_type(node.data))
        return False
    if t is GlobalVar:
        resolve(node)
        return False
    if t is Op:
        raise TypeInferenceError(
            f"operator {node.name} is used as a value: operators can only be called")
    return True


def _known(node: Expr, what: str) -> Type:
    t = node._checked_type
    if t is None:  # only an unannotated variable gets here
        raise _untyped_var(node) if type(node) is Var else TypeInferenceError(
            f"the {what} has no type")
    return t


#: Direct setters of the ``_checked_type`` slot and of ``Var.type_annotation`` (the slot
#: descriptors' own ``__set__``: a third of the cost of a ``_set_checked_type`` method call,
#: which matters at one call per node on million-node graphs).
_set_type = Expr.__dict__["_checked_type"].__set__
_set_annotation = Var.__dict__["type_annotation"].__set__

#: first item of the memo keys of function types (op-call keys start with the Op)
_FN_KEY = object()


def _relate(op: Op, arg_types: list, attrs) -> Type:
    """Run the type relation of ``op``; errors name the op. An argument of incomplete
    type (a recursive call being probed) makes the result incomplete too."""
    for t in arg_types:
        if type(t) is IncompleteType:
            return t
    try:
        ty = op._def.type_rel(arg_types, attrs)
    except PasshostError as e:
        raise TypeInferenceError(f"in call to {op.name}: {e}") from e
    except Exception as e:  # a bug in the relation: still say which op
        raise TypeInferenceError(
            f"in call to {op.name}: its type relation failed with "
            f"{type(e).__name__}: {e}") from e
    if type(ty) is not TensorType and not isinstance(ty, Type):
        raise TypeInferenceError(
            f"in call to {op.name}: the type relation returned {ty!r}, not a type")
    return ty


# hot loop: one step per node of every graph typed; each kind of node is handled in line (a helper call
# per node would cost as much as the step)
def _infer_expr(root: Expr, resolve: _Resolver, name: Optional[str] = None,
                memo: Optional[dict] = None) -> Type:
    """Type ``root`` and everything under it that is not typed yet.

    ``memo`` remembers the result of each type relation by the op and the identities of
    the argument types, for calls with the op's default (or no) attributes -- a graph
    repeats a handful of signatures, so most relations run once per signature, not once
    per call (calls with their own attrs run their relation: attrs objects are mostly
    unique, and comparing them by value would be as slow as most relations). Keys hold
    object ids; each entry keeps those objects alive, so an id is never reused while the
    memo lives. Function types of equal signatures are shared the same way.
    """
    if root._checked_type is not None:
        return root._checked_type
    try:
        leaf = _leaf(root, resolve)
        if not leaf and root._checked_type is None:
            raise _untyped_var(root)
    except TypeInferenceError as err:
        if getattr(err, "node", None) is None:
            err.node = root
            _name_span(err, root)
        raise
    if not leaf:
        return root._checked_type
    if memo is None:
        memo = {}
    memo_get = memo.get

    pending: list = []  # untyped variables consumed by op calls
    expect: dict = {}  # expression -> the type its context requires (a return annotation)
    stack = [root]
    push = stack.append
    pop = stack.pop
    settype = _set_type
    _id = id
    _Call, _Var, _Constant, _GlobalVar, _Op, _Function = Call, Var, Constant, GlobalVar, Op, Function
    try:
        while stack:
            node = stack[-1]
            if node._checked_type is not None:
                pop()
                continue
            t = type(node)
            if t is _Call:
                op = node.op
                args = node.args
                if type(op) is _Op:
                    # Fast path: an op call of one or two typed (or annotated) arguments.
                    n = len(args)
                    if n == 2:
                        a0, a1 = args
                        t0 = a0._checked_type
                        if t0 is None:
                            ta = type(a0)
                            if ta is _Var:
                                t0 = a0.type_annotation
                                if t0 is not None:
                                    settype(a0, t0)
                            elif ta is _Constant:
                                t0 = _constant_type(a0.data)
                                settype(a0, t0)
                        t1 = a1._checked_type
                        if t1 is None:
                            ta = type(a1)
                            if ta is _Var:
                                t1 = a1.type_annotation
                                if t1 is not None:
                                    settype(a1, t1)
                            elif ta is _Constant:
                                t1 = _constant_type(a1.data)
                                settype(a1, t1)
                        if t0 is not None:
                            if t1 is not None:
                                pop()
                                attrs = node.attrs
                                if attrs is op._defaults or not attrs:
                                    key = (op, _id(t0), _id(t1))
                                    hit = memo_get(key)
                                    if hit is None:
                                        ty = _relate(op, [t0, t1], attrs)
                                        memo[key] = (ty, t0, t1)
                                    else:
                                        ty = hit[0]
                                else:
                                    ty = _relate(op, [t0, t1], attrs)
                                settype(node, ty)
                                continue
                            if type(a1) is _Call:
                                push(a1)
                                continue
                        elif type(a0) is _Call:
                            if t1 is None:
                                if type(a1) is _Call:
                                    push(a1)
                                    push(a0)
                                    continue
                            else:
                                push(a0)
                                continue
                    elif n == 1:
                        a0 = args[0]
                        t0 = a0._checked_type
                        if t0 is None:
                            ta = type(a0)
                            if ta is _Var:
                                t0 = a0.type_annotation
                                if t0 is not None:
                                    settype(a0, t0)
                            elif ta is _Constant:
                                t0 = _constant_type(a0.data)
                                settype(a0, t0)
                        if t0 is not None:
                            pop()
                            attrs = node.attrs
                            if attrs is op._defaults or not attrs:
                                key = (op, _id(t0))
                                hit = memo_get(key)
                                if hit is None:
                                    ty = _relate(op, [t0], attrs)
                                    memo[key] = (ty, t0)
                                else:
                                    ty = hit[0]
                            else:
                                ty = _relate(op, [t0], attrs)
                            settype(node, ty)
                            continue
                        if type(a0) is _Call:
                            push(a0)
                            continue
                elif op._checked_type is not None:
                    # A typed callee (function, closure, global) whose arguments are typed.
                    for a in args:
                        if a._checked_type is None:
                            break
                    else:
                        pop()
                        settype(node, _call_type(node, op))
                        continue
                elif type(op) is _Function:
                    # A call of a fresh function (FuseOps output) whose untyped arguments are
                    # calls: push them, then the function (typed first, as below).
                    for a in args:
                        if a._checked_type is None and type(a) is not _Call:
                            break
                    else:
                        for i in range(len(args) - 1, -1, -1):
                            a = args[i]
                            if a._checked_type is None:
                                push(a)
                        push(op)
                        continue
                pushed = False
                unknown = False
                for a in reversed(args):
                    if a._checked_type is None:
                        ta = type(a)
                        if ta is _Var:
                            ann = a.type_annotation
                            if ann is not None:
                                settype(a, ann)
                            else:
                                unknown = True
                        elif ta is _Constant:
                            settype(a, _constant_type(a.data))
                        elif ta is _GlobalVar or ta is _Op:
                            _leaf(a, resolve)
                        else:
                            push(a)
                            pushed = True
                top = type(op)
                if top is not _Op and op._checked_type is None:
                    if top is _Function:
                        push(op)
                        pushed = True
                    elif _leaf(op, resolve):
                        push(op)
                        pushed = True
                    elif op._checked_type is None and not pushed:
                        # an unannotated called variable: its type is fn (argument types) -> the
                        # type this call must have, when the context says it
                        want = expect.get(node) if expect else None
                        if want is None or unknown:
                            raise _untyped_var(op, "a called variable")
                        ft = FuncType([a._checked_type for a in args], want)
                        _set_annotation(op, ft)
                        settype(op, ft)
                if pushed:
                    continue
                pop()
                if top is _Op:
                    arg_types = [a._checked_type for a in args]
                    attrs = node.attrs
                    if unknown:
                        ty = _relate(op, arg_types, attrs)
                        _fill_vars(args, arg_types, pending)
                    elif attrs is op._defaults or not attrs:
                        held = tuple(arg_types)
                        key = (op, *map(_id, held))
                        hit = memo_get(key)
                        if hit is None:
                            ty = _relate(op, arg_types, attrs)
                            memo[key] = (ty, held)
                        else:
                            ty = hit[0]
                    else:
                        ty = _relate(op, arg_types, attrs)
                else:
                    ty = _call_type(node, op)
                settype(node, ty)
            elif t is _Function:
                body = node.body
                if body._checked_type is None and (type(body) is _Call or _leaf(body, resolve)):
                    if node.ret_type is not None:
                        expect[body] = node.ret_type
                    push(body)
                    continue
                pop()
                rt = node.ret_type
                bt = body._checked_type
                if rt is not None and bt is not None and (rt is bt or rt == bt):
                    # common case (e.g. FuseOps output): typed/annotated params, matching ret
                    key = [_FN_KEY, _id(bt)]
                    for p in node.params:
                        pt = p._checked_type
                        if pt is None:
                            pt = p.type_annotation
                            if pt is None:
                                break
                            settype(p, pt)
                        key.append(_id(pt))
                    else:
                        key = tuple(key)
                        hit = memo_get(key)
                        if hit is None:
                            ptypes = [p._checked_type for p in node.params]
                            ft = FuncType(ptypes, bt)
                            memo[key] = (ft, bt, ptypes)
                        else:
                            ft = hit[0]
                        settype(node, ft)
                        continue
                settype(node, _function_type(node, root, name, memo))
            elif t is Let:
                value = node.value
                if type(value) is _Function and node.var._checked_type is None \
                        and node.var.type_annotation is None and value._checked_type is None:
                    # a let-bound function that may call itself (TVM's letrec): with its
                    # parameters and return type annotated, the variable has that type before
                    # the body that calls it is typed
                    sig = _signature(value)
                    if sig is not None:
                        _set_annotation(node.var, sig)  # as an unannotated let variable gets its value's type
                        settype(node.var, sig)
                if _leaf(value, resolve):
                    push(value)
                    continue
                vt = _known(value, "let value")
                var = node.var
                cur = var._checked_type
                if cur is None:
                    ann = var.type_annotation
                    if ann is None:
                        _set_annotation(var, vt)
                        cur = vt
                    else:
                        cur = ann
                    settype(var, cur)
                if cur is not vt and cur != vt:
                    raise TypeInferenceError(
                        f"let %{var.name_hint} is annotated {cur} but its value has type {vt}: "
                        "fix the annotation or the value")
                body = node.body
                if _leaf(body, resolve):
                    if expect and node in expect:
                        expect[body] = expect[node]
                    push(body)
                    continue
                pop()
                settype(node, _known(body, "let body"))
            elif t is Tuple:
                pushed = False
                for f in reversed(node.fields):
                    if _leaf(f, resolve):
                        push(f)
                        pushed = True
                if pushed:
                    continue
                pop()
                settype(node, TupleType([_known(f, "tuple field") for f in node.fields]))
            elif t is TupleGetItem:
                tv = node.tuple_value
                if _leaf(tv, resolve):
                    push(tv)
                    continue
                pop()
                settype(node, _getitem_type(node, _known(tv, "tuple")))
            elif t is If:
                pushed = False
                if expect and node in expect:
                    expect[node.true_branch] = expect[node.false_branch] = expect[node]
                for c in _USES_OF[If](node)[::-1]:
                    if _leaf(c, resolve):
                        push(c)
                        pushed = True
                if pushed:
                    continue
                pop()
                settype(node, _if_type(node))
            else:  # leaves only reach here as the root, which _leaf handled
                raise TypeInferenceError(f"cannot infer the type of a {t.__name__}")

    except TypeInferenceError as err:
        if getattr(err, "node", None) is None:
            err.node = node  # the expression being typed when it failed: callers locate it
            _name_span(err, node)
        raise
    for v in pending:
        if v._checked_type is None:
            raise _untyped_var(v)
    return root._checked_type


def _fill_vars(args: tuple, arg_types: list, pending: list) -> None:
    """Write types a relation filled in into the untyped variables among ``args``."""
    for a, at in zip(args, arg_types):
        if a._checked_type is None and type(a) is Var:
            if at is None:
                pending.append(a)
            elif isinstance(at, Type):
                a._set_type_annotation(at)
                a._set_checked_type(at)
            else:
                raise TypeInferenceError(
                    f"a type relation filled %{a.name_hint} with {at!r}, which is not a type")


def _call_type(node: Call, op: Expr) -> Type:
    ft = op._checked_type
    if type(ft) is not FuncType:
        raise TypeInferenceError(
            f"cannot call {_callee_name(op)}: it has type {ft}, not a function type")
    params = ft.arg_types
    args = node.args
    if len(args) != len(params):
        raise TypeInferenceError(
            f"call to {_callee_name(op)} passes {len(args)} argument{'s' if len(args) != 1 else ''} "
            f"but it takes {len(params)} ({ft})")
    i = 0
    for a in args:
        pt = params[i]
        at = a._checked_type
        if at is None:  # an unannotated variable: the parameter type fills it
            _set_annotation(a, pt)
            _set_type(a, pt)
        elif at is not pt and at != pt and type(at) is not IncompleteType and not _accepts(pt, at):
            raise TypeInferenceError(
                f"argument {i} of call to {_callee_name(op)} has type {at}, but the parameter "
                f"expects {pt}")
        i += 1
    return ft.ret_type


def _accepts(pt: Type, at: Type) -> bool:
    """Whether a parameter of type ``pt`` takes an argument of type ``at`` that is not equal
    to it: a ``?`` of the parameter takes any size, as TVM's unification of ``Any``::

        fn (%x: Tensor[(?), float32]) { ... }(%y)     /* %y: Tensor[(10), float32] */
    """
    if type(pt) is TupleType:
        return type(at) is TupleType and len(at.fields) == len(pt.fields) and all(
            f is g or f == g or _accepts(f, g) for f, g in zip(pt.fields, at.fields))
    if type(pt) is not TensorType or type(at) is not TensorType:
        return False
    return pt.dtype == at.dtype and len(pt.shape) == len(at.shape) and all(
        p is ANY or p == a for p, a in zip(pt.shape, at.shape))


def _function_type(node: Function, root: Expr, name: Optional[str], memo: dict) -> FuncType:
    ptypes = []
    append = ptypes.append
    for p in node.params:
        pt = p._checked_type
        if pt is None:
            pt = p.type_annotation
            if pt is None:
                raise _untyped_var(p, f"a parameter of {_where(node, root, name)}")
            _set_type(p, pt)
        append(pt)
    body_type = _known(node.body, "function body")
    rt = node.ret_type
    if rt is None:
        node._set_ret_type(body_type)
    elif rt is not body_type and rt != body_type:
        raise TypeInferenceError(
            f"{_where(node, root, name)} is annotated to return {rt} but its body has type "
            f"{body_type}: fix the return type annotation or the body")
    # Functions of one signature share one (immutable) FuncType; see _infer_expr's memo.
    key = (_FN_KEY, id(body_type), *map(id, ptypes))
    hit = memo.get(key)
    if hit is None:
        ft = FuncType(ptypes, body_type)
        memo[key] = (ft, body_type, ptypes)  # keeps the keyed objects alive
        return ft
    return hit[0]


def _getitem_type(node: TupleGetItem, tt: Type) -> Type:
    if type(tt) is IncompleteType:
        return tt
    if type(tt) is not TupleType:
        raise TypeInferenceError(
            f"tuple index .{node.index} is applied to a value of type {tt}, which is not a tuple")
    n = len(tt.fields)
    if node.index >= n:
        raise TypeInferenceError(
            f"tuple index {node.index} is out of range for a tuple of {n} field"
            f"{'s' if n != 1 else ''} ({tt}): use an index below {n}")
    return tt.fields[node.index]


def _if_type(node: If) -> Type:
    ct = _known(node.cond, "if condition")
    if type(ct) is not IncompleteType and (type(ct) is not TensorType or ct.shape != ()):
        raise TypeInferenceError(
            f"the condition of an if must be a rank-0 (scalar) tensor such as bool, got {ct}")
    tt = _known(node.true_branch, "then branch")
    ft = _known(node.false_branch, "else branch")
    if type(tt) is IncompleteType:
        return ft  # a recursive branch being probed: the other one gives the type
    if type(ft) is IncompleteType:
        return tt
    if tt != ft:
        raise TypeInferenceError(
            f"the branches of an if have different types: {tt} (then) and {ft} (else)")
    return tt
