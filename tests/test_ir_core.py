"""Types, nodes, attrs, the op registry and IRModule: the IR's foundations."""
from __future__ import annotations

import numpy as np
import pytest

from passhost import ir
from passhost.errors import IRError
from passhost.ir import Attrs, Call, Constant, Function, FuncType, GlobalVar, IRModule, TensorType, TupleType


def test_types_print_as_tvm():
    assert str(TensorType((1, 64, 56, 56), "float32")) == "Tensor[(1, 64, 56, 56), float32]"
    assert str(TensorType((3,), "float32")) == "Tensor[(3), float32]"
    assert str(TensorType((), "float32")) == "float32"
    assert str(TupleType([TensorType((3,)), TensorType((), "int32")])) == "(Tensor[(3), float32], int32)"
    assert str(TupleType([TensorType((), "bool")])) == "(bool,)"
    assert str(FuncType([TensorType((2,))], TensorType((2,)))) == "fn (Tensor[(2), float32]) -> Tensor[(2), float32]"


def test_types_are_values():
    a, b = TensorType((1, 2), "int8"), TensorType([1, 2], "int8")
    assert a == b and hash(a) == hash(b) and a is not b
    assert a != TensorType((1, 2), "uint8")
    assert TupleType([a]) == TupleType([b])
    with pytest.raises(AttributeError):
        a.shape = (3,)


@pytest.mark.parametrize("bad", ["float8", "complex64", 3])
def test_unknown_dtype_is_rejected_with_the_list(bad):
    with pytest.raises(IRError, match="unknown dtype .*float32"):
        TensorType((1,), bad)


def test_nodes_are_immutable_and_compared_by_identity():
    x = ir.var("x", shape=(2,))
    a, b = ir.add(x, x), ir.add(x, x)
    assert a != b and a == a and len({a, b}) == 2
    with pytest.raises(AttributeError, match="immutable"):
        a.args = ()
    with pytest.raises(AttributeError, match="immutable"):
        del a.op


def test_checked_type_before_inference_says_what_to_do():
    x = ir.var("x", shape=(2,))
    call = ir.exp(x)
    assert not call.has_type
    with pytest.raises(IRError, match="run type inference"):
        _ = call.checked_type
    ir.infer_type(call)
    assert call.checked_type == TensorType((2,), "float32")


def test_constants_are_read_only_copies():
    data = np.arange(4, dtype="float32")
    c = Constant(data)
    data[0] = 100
    assert c.data[0] == 0 and not c.data.flags.writeable
    assert Constant(np.arange(4, dtype="float32")).data_hash() == c.data_hash()
    with pytest.raises(IRError, match="unknown dtype"):
        Constant(np.array([1 + 2j]))


def test_a_folded_matrix_transpose_is_a_view_and_prints_and_hashes_as_values():
    """A read-only array contiguous in either order is kept as it is: a folded weight
    transpose costs no copy (and transposing it back gives the original buffer), while
    the text format, hashing and equality see only the values."""
    w = np.arange(12, dtype="float32").reshape(3, 4)
    w.flags.writeable = False
    c = Constant(w)
    assert c.data is w
    folded = Constant(ir.evaluate(ir.transpose(c)))  # what constant folding makes of it
    assert np.shares_memory(folded.data, w) and folded.data.flags.f_contiguous
    assert folded.data_hash() == Constant(np.ascontiguousarray(w.T)).data_hash()
    assert ir.structural_equal(folded, Constant(np.ascontiguousarray(w.T)))
    back = ir.evaluate(ir.transpose(folded))
    assert np.shares_memory(back, w) and back.flags.c_contiguous
    text = ir.astext(IRModule.from_expr(ir.Function([], folded)), show_meta_data=True)
    again = ir.parse(text)["main"].body
    np.testing.assert_array_equal(again.data, w.T)
    odd = np.arange(24, dtype="float32").reshape(2, 3, 4).transpose(1, 0, 2)  # neither order: copied
    odd.flags.writeable = False
    assert Constant(odd).data.flags.c_contiguous and not np.shares_memory(Constant(odd).data, odd)


def test_call_attrs_are_completed_validated_and_frozen():
    x = ir.var("x", shape=(1, 3, 8, 8))
    call = ir.nn.softmax(x)
    assert call.attrs["axis"] == -1 and call.attrs.axis == -1
    with pytest.raises(IRError, match="no attribute 'axes'.*axis"):
        Call(ir.Op.get("nn.softmax"), [x], {"axes": 1})
    with pytest.raises(TypeError, match="immutable"):
        call.attrs["axis"] = 2
    assert Attrs({"a": [1, 2]}) == Attrs({"a": (1, 2)}) and hash(Attrs({"a": [1, 2]})) == hash(Attrs({"a": (1, 2)}))


def test_call_arity_is_checked():
    x = ir.var("x", shape=(2,))
    with pytest.raises(IRError, match="operator add takes 2 arguments, got 1"):
        Call(ir.Op.get("add"), [x])


def test_op_registry_lookup_suggests_close_names():
    assert ir.Op.get("add") is ir.Op.get("add")
    with pytest.raises(IRError, match="`ad` not found.*add"):
        ir.Op.get("ad")
    assert "nn.conv2d" in ir.list_ops()


def test_register_op_rejects_bad_records_and_duplicates():
    with pytest.raises(IRError, match="already registered"):
        ir.register_op(ir.OpDef("add", 2, lambda a, at: a[0]))
    with pytest.raises(IRError, match="unknown pattern"):
        ir.register_op(ir.OpDef("test.badpattern", 1, lambda a, at: a[0], pattern=5))
    op = ir.register_op(ir.OpDef("test.core.id", 1, lambda a, at: a[0], attrs=(("k", 1),),
                                 compute=lambda a, at: a[0]), override=True)
    x = ir.var("x", shape=(2,))
    assert Call(op, [x]).attrs == {"k": 1}


def test_irmodule_api():
    x = ir.var("x", shape=(2,))
    f = Function([x], ir.exp(x))
    mod = IRModule.from_expr(f)
    assert mod["main"] is f and "main" in mod and len(mod) == 1
    gv = mod.get_global_var("main")
    assert isinstance(gv, GlobalVar) and mod[gv] is f
    g = Function([x], ir.log(x))
    other = IRModule({"helper": g})
    mod.update(other)
    assert set(gv.name_hint for gv in mod.functions) == {"main", "helper"}
    copy = mod.copy()
    del copy["helper"]
    assert "helper" in mod and "helper" not in copy
    with pytest.raises(IRError, match="no function @nope .*helper, main"):
        mod["nope"]
    with pytest.raises(IRError, match="must be Functions"):
        mod["bad"] = x


def test_from_expr_wraps_a_bare_expression_in_a_function_of_its_free_vars():
    x, y = ir.var("x", shape=(2,)), ir.var("y", shape=(2,))
    mod = IRModule.from_expr(ir.add(x, y))
    assert list(mod["main"].params) == [x, y]


def test_call_with_args_keeps_callee_attrs_and_type_only_when_args_are_typed():
    x = ir.var("x", shape=(1, 3, 4, 4))
    call = ir.nn.softmax(x, axis=1)
    ir.infer_type(call)
    y = ir.var("y", shape=(1, 3, 4, 4))
    copy = call.with_args((y,))
    assert copy.op is call.op and copy.attrs is call.attrs and copy.args == (y,)
    assert not copy.has_type                       # y is untyped
    ir.infer_type(y)
    assert call.with_args((y,)).checked_type == call.checked_type
    assert not call.with_args((y,), keep_type=False).has_type
def test_functions_are_weakly_referenceable():
    import gc
    import weakref

    from passhost import ir

    x = ir.Var("x", ir.TensorType((2,), "float32"))
    fn = ir.Function([x], x)
    facts = weakref.WeakKeyDictionary({fn: "folded"})
    assert facts[fn] == "folded"
    del fn
    gc.collect()
    assert len(facts) == 0


def test_attrs_from_a_plain_dict_are_a_frozen_copy():
    src = {"Primitive": 1, "name": "f", "eps": 1e-5, "flag": True, "none": None}
    a = Attrs(src)
    src["Primitive"] = 0  # the source dict stays the caller's
    assert a == {"Primitive": 1, "name": "f", "eps": 1e-5, "flag": True, "none": None}
    assert list(a) == ["Primitive", "name", "eps", "flag", "none"]
    assert a.flag is True and hash(a) == hash(Attrs(dict(a)))
    nested = Attrs({"pad": [1, [2, 3]], "n": np.int64(4), "arr": np.array([1, 2]), "d": {"k": [5]}})
    assert nested == {"pad": (1, (2, 3)), "n": 4, "arr": (1, 2), "d": {"k": (5,)}}
    assert type(nested["n"]) is int and type(nested["d"]) is Attrs
    with pytest.raises(TypeError, match="immutable"):
        a["x"] = 1
    fn = Function([], ir.const(1.0), attrs={"Primitive": 1, "relay.reshape_only": 1})
    assert type(fn.attrs) is Attrs and fn.attrs == {"Primitive": 1, "relay.reshape_only": 1}


def test_constructors_still_validate_their_fields():
    x = ir.var("x", shape=(2,))
    with pytest.raises(IRError, match="Var name must be a string"):
        ir.Var(3)
    with pytest.raises(IRError, match="must be a Type"):
        ir.Var("v", "float32")
    with pytest.raises(IRError, match="call arguments must be expressions"):
        Call(ir.Op.get("add"), [x, 1.0])
    with pytest.raises(IRError, match="function parameters must be Vars"):
        Function([ir.const(1.0)], x)
    with pytest.raises(IRError, match="return type must be a Type"):
        Function([x], x, "float32")
    with pytest.raises(IRError, match="tuple fields must be expressions"):
        ir.Tuple([x, 2])
    for bad in (True, -1, 1.0, "0"):
        with pytest.raises(IRError, match="tuple index must be a non-negative int"):
            ir.TupleGetItem(x, bad)
    item = ir.TupleGetItem(ir.Tuple([x, x]), np.int64(1))
    assert item.index == 1 and type(item.index) is int
    call = Call(ir.Op.get("add"), (x, x), ir.Op.get("add").attr_defaults)
    assert call.attrs is ir.Op.get("add").attr_defaults and call.args == (x, x)
    let = ir.Let(ir.var("v"), x, x)
    ite = ir.If(ir.const(True), x, x)
    assert (let.var.name_hint, let.value, let.body) == ("v", x, x)
    assert (ite.true_branch, ite.false_branch) == (x, x)
    for node in (call, let, ite, item, Function([x], x)):
        assert not node.has_type


def test_whole_graph_functions_promote_a_large_graph_when_the_gc_resumes():
    import gc

    from passhost.ir import _gc
    from passhost.testing import chain

    @_gc.gc_paused
    def build(n):
        return ir.infer_type(chain(n))

    gc.collect()
    mod = build(60_000)  # well over PROMOTE_AFTER tracked objects
    assert gc.isenabled() and gc.get_freeze_count() == 0
    assert gc.get_count()[0] < 1_000  # survivors promoted, no huge young generation pending
    assert mod["main"].has_type


def test_paused_gc_is_public_reentrant_and_restores_the_collector():
    import gc

    assert gc.isenabled()
    with ir.paused_gc():
        assert not gc.isenabled()
        with ir.paused_gc():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_paused_gc_leaves_a_collector_the_user_disabled_alone_and_restores_after_an_error():
    import gc

    gc.disable()
    try:
        with ir.paused_gc():
            assert not gc.isenabled()
        assert not gc.isenabled()  # not turned on behind the user's back
    finally:
        gc.enable()
    with pytest.raises(ValueError):
        with ir.paused_gc():
            raise ValueError("inside")
    assert gc.isenabled()


def test_quiet_kernels_silences_numpy_for_every_kernel_inside_and_restores_the_error_state():
    import warnings

    import numpy as np

    divide = ir.Op.get("divide")
    one, zero = np.ones(3, "float32"), np.zeros(3, "float32")
    before = np.geterr()
    with np.errstate(all="raise"):
        # a kernel called alone silences numpy itself
        assert np.isinf(divide.compute([one, zero], divide._defaults)).all()
        with ir.quiet_kernels():
            assert np.geterr()["divide"] == "ignore"
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                out = divide.compute([one, zero], divide._defaults)
        assert np.isinf(out).all()
        assert np.geterr()["divide"] == "raise"  # the caller's state is back
        with pytest.raises(FloatingPointError):
            np.divide(one, zero)
    assert np.geterr() == before


def test_equal_attributes_are_normalised_once_and_shared_but_never_confused():
    x = ir.var("x", shape=(2, 3))
    op = ir.Op.get("expand_dims")
    a = ir.Call(op, (x,), {"axis": 1, "num_newaxis": 2})
    b = ir.Call(op, (x,), {"axis": 1, "num_newaxis": 2})
    assert a.attrs is b.attrs and a.attrs == {"axis": 1, "num_newaxis": 2}
    # equal in Python, different as attributes: each keeps its own type and sign
    lrelu = ir.Op.get("nn.leaky_relu")
    for alpha in (1, 1.0, True, 0.0, -0.0):
        got = ir.Call(lrelu, (x,), {"alpha": alpha}).attrs["alpha"]
        assert type(got) is type(alpha) and repr(got) == repr(alpha)
    pad = ir.Op.get("nn.max_pool2d")
    lists = ir.Call(pad, (ir.var("y", shape=(1, 1, 4, 4)),), {"pool_size": [2, 2]}).attrs
    assert lists["pool_size"] == (2, 2)
    # a bad attribute is rejected every time, not only the first
    for _ in range(2):
        with pytest.raises(ir.IRError, match="no attribute 'axes'"):
            ir.Call(op, (x,), {"axes": 1})


def test_paused_gc_decorates_a_function_and_a_recursive_call_restores_it_once():
    import gc

    seen = []

    @ir.paused_gc()
    def walk(n):
        seen.append(gc.isenabled())
        if n:
            walk(n - 1)
        seen.append(gc.isenabled())

    walk(3)
    assert seen == [False] * 8 and gc.isenabled()
