"""structural_equal / structural_hash (TVM semantics) and bind_params_by_name."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from passhost import ir
from passhost.errors import IRError
from passhost.ir.structural import assert_structural_equal


def sequal(a, b, map_free_vars=False):
    """Equal both ways, and (when equal) hashes agree — TVM's test helper."""
    ab = ir.structural_equal(a, b, map_free_vars)
    ba = ir.structural_equal(b, a, map_free_vars)
    assert ab == ba, "structural_equal is not symmetric"
    if ab:
        assert ir.structural_hash(a) == ir.structural_hash(b)
    return ab


def t(shape=(2, 3), dtype="float32"):
    return ir.TensorType(shape, dtype)


# --------------------------------------------------------------------------- leaves


def test_constants_compare_by_dtype_shape_and_bytes():
    assert sequal(ir.const(1.0), ir.const(1.0))
    assert not sequal(ir.const(1.0), ir.const(2.0))
    assert not sequal(ir.const(1.0, "float32"), ir.const(1.0, "float64"))
    assert not sequal(ir.const(np.zeros((2, 3), "float32")), ir.const(np.zeros((3, 2), "float32")))
    a = np.arange(6, dtype="float32").reshape(2, 3)
    assert sequal(ir.const(a), ir.const(a.copy()))
    # NaNs compare by their bits, so a constant equals itself rebuilt
    n = np.array([np.nan, 1.0], "float32")
    assert sequal(ir.const(n), ir.const(n.copy()))
    # -0.0 and 0.0 differ in bytes
    assert not sequal(ir.const(np.float32(0.0)), ir.const(np.float32(-0.0)))
    # large constants, shared several times, differing in one element
    big = np.arange(10_000, dtype="float32").reshape(100, 100)
    other = big.copy()
    other[99, 99] = -1.0
    x = ir.var("x", t((100, 100)))
    c, c_same, c_other = ir.const(big), ir.const(big.copy()), ir.const(other)
    assert sequal(ir.add(ir.add(x, c), c), ir.add(ir.add(x, c_same), c_same))
    assert not sequal(ir.add(ir.add(x, c), c), ir.add(ir.add(x, c_other), c_other))
    assert not sequal(ir.add(ir.add(x, c), c), ir.add(ir.add(x, c_same), c_other))


def test_ops_and_global_vars():
    assert sequal(ir.Op.get("add"), ir.Op.get("add"))
    assert not sequal(ir.Op.get("add"), ir.Op.get("multiply"))
    assert sequal(ir.GlobalVar("f"), ir.GlobalVar("f"))
    assert not sequal(ir.GlobalVar("f"), ir.GlobalVar("g"))


def test_different_node_kinds_differ():
    x = ir.var("x", t())
    assert not sequal(x, ir.const(1.0))
    assert not sequal(ir.Tuple([x]), ir.TupleGetItem(ir.Tuple([x]), 0))
    assert not sequal(ir.Tuple([]), ir.const(1.0))


def test_types_and_attrs():
    assert ir.structural_equal(t(), t())
    assert not ir.structural_equal(t(), t((3, 2)))
    assert not ir.structural_equal(t(), ir.TupleType([t()]))
    assert ir.structural_equal(ir.FuncType([t()], t()), ir.FuncType([t()], t()))
    assert ir.structural_hash(t()) == ir.structural_hash(t())
    assert ir.structural_equal(ir.Attrs({"a": [1, 2]}), ir.Attrs({"a": (1, 2)}))
    assert not ir.structural_equal(ir.Attrs({"a": 1}), ir.Attrs({"a": 2}))
    assert ir.structural_hash(ir.Attrs({"a": [1, 2]})) == ir.structural_hash(ir.Attrs({"a": (1, 2)}))
    assert not ir.structural_equal(t(), ir.var("x", t()))


def test_lists_of_exprs_share_one_mapping():
    x = ir.var("x")
    y = ir.var("y")
    assert ir.structural_equal([x, y], [x, y])
    assert not ir.structural_equal([x, x], [x, y], map_free_vars=True)
    assert not ir.structural_equal([x], [x, y])


def test_non_ir_values_raise():
    with pytest.raises(IRError, match="cannot compare"):
        ir.structural_equal(object(), object())
    with pytest.raises(IRError, match="cannot hash"):
        ir.structural_hash(object())


# --------------------------------------------------------------------------- variables


def test_free_vars_need_identity_unless_mapped():
    v1, v2 = ir.var("v1"), ir.var("v2")
    assert sequal(v1, v1)
    assert not sequal(v1, v2)
    assert ir.structural_equal(v1, v2, map_free_vars=True)
    # same name is not enough
    assert not sequal(ir.var("x"), ir.var("x"))


def test_map_free_vars_is_one_to_one_by_first_occurrence():
    x, y, a, b = (ir.var(n, t()) for n in "xyab")
    assert ir.structural_equal(ir.add(x, y), ir.add(a, b), map_free_vars=True)
    assert not ir.structural_equal(ir.add(x, y), ir.add(a, b))
    assert not ir.structural_equal(ir.add(x, x), ir.add(a, b), map_free_vars=True)
    assert not ir.structural_equal(ir.add(x, y), ir.add(a, a), map_free_vars=True)
    # annotations must still agree
    assert not ir.structural_equal(x, ir.var("z", t((9,))), map_free_vars=True)
    # the hash treats free variables positionally in both modes
    assert ir.structural_hash(ir.add(x, y)) == ir.structural_hash(ir.add(a, b))


def test_let_binds_positionally_names_ignored():
    v1, v2 = ir.var("v1"), ir.var("v2")
    l1 = ir.Let(v1, ir.const(1.0), v1)
    l2 = ir.Let(v2, ir.const(1.0), v2)
    l3 = ir.Let(v1, ir.const(1.0), v2)
    assert sequal(l1, l2)
    assert not sequal(l1, l3)
    # annotations of bound vars are compared
    a, b, c = ir.var("a", t((), "int32")), ir.var("b", t((), "int32")), ir.var("c", t((), "int64"))
    assert sequal(ir.Let(a, ir.const(1), a), ir.Let(b, ir.const(1), b))
    assert not sequal(ir.Let(a, ir.const(1), a), ir.Let(c, ir.const(1), c))
    assert not sequal(l1, ir.Let(a, ir.const(1.0), a))


def test_function_params_alpha_equivalence():
    tt1, tt2 = t((1, 2, 3)), t((4, 5, 6), "int8")
    v1, v2 = ir.var("v1", tt1), ir.var("v2", tt2)
    w1, w2 = ir.var("w1", tt1), ir.var("w2", tt2)
    f = ir.Function([v1, v2], v1, tt1)
    assert sequal(f, ir.Function([w1, w2], w1, tt1))
    assert not sequal(f, ir.Function([w1, w2], w2, tt1))           # body uses the other param
    assert not sequal(f, ir.Function([w2, w1], w1, tt1))           # param order
    assert not sequal(f, ir.Function([w1], w1, tt1))               # fewer params
    assert not sequal(f, ir.Function([w1, w2], w1, tt2))           # ret_type
    assert not sequal(f, ir.Function([w1, w2], w1))                # one ret_type missing
    assert not sequal(f, ir.Function([w1, w2], w1, tt1, {"Primitive": 1}))  # attrs
    assert sequal(f.with_attr("Primitive", 1), ir.Function([w1, w2], w1, tt1, {"Primitive": 1}))


def test_swapped_shared_params_are_not_confused():
    # TVM's counter-example: same var objects, swapped binding order
    x, y = ir.var("x", t()), ir.var("y", t())
    f0 = ir.Function([x, y], ir.subtract(x, y))
    f1 = ir.Function([y, x], ir.subtract(x, y))
    assert not sequal(f0, f1)


def test_hash_ignores_var_names_but_not_types():
    def fn(nx, ny, shape):
        x, y = ir.var(nx, t(shape)), ir.var(ny, t(shape))
        return ir.Function([x, y], ir.add(x, y))

    assert ir.structural_hash(fn("x1", "y1", (10, 10))) == ir.structural_hash(fn("a", "b", (10, 10)))
    assert ir.structural_hash(fn("x1", "y1", (10, 10))) != ir.structural_hash(fn("x1", "y1", (20, 10)))


# --------------------------------------------------------------------------- graph structure


def test_dag_sharing_must_match():
    """TVM's ``test_graph_equal``: a shared node differs from duplicated subtrees."""
    x = ir.var("x", t())
    y0 = ir.add(x, x)
    z0 = ir.add(y0, y0)
    y1 = ir.add(x, x)
    z1 = ir.add(y1, y1)
    z3 = ir.add(ir.add(x, x), ir.add(x, x))
    assert sequal(z0, z1)
    assert not sequal(z0, z3)
    assert not sequal(z3, z0)
    # ... but duplicated subtrees on both sides match each other
    assert sequal(z3, ir.add(ir.add(x, x), ir.add(x, x)))


def test_constants_are_not_graph_nodes():
    # as in TVM, sharing a constant or using equal copies does not matter
    x = ir.var("x", t())
    c = ir.const(np.ones((2, 3), "float32"))
    c2 = ir.const(np.ones((2, 3), "float32"))
    assert sequal(ir.add(ir.add(x, c), c), ir.add(ir.add(x, c), c2))
    assert sequal(ir.Tuple([ir.Tuple([]), ir.Tuple([])]), ir.Tuple([ir.Tuple([]), ir.Tuple([])]))


def test_calls_compare_op_args_attrs():
    x, w = ir.var("x", t((1, 3, 8, 8))), ir.var("w", t((4, 3, 3, 3)))
    a = ir.nn.conv2d(x, w, padding=(1, 1))
    assert sequal(a, ir.nn.conv2d(x, w, padding=(1, 1)))
    assert sequal(a, ir.nn.conv2d(x, w, padding=[1, 1]))
    assert not sequal(a, ir.nn.conv2d(x, w, padding=(0, 0)))
    assert not sequal(a, ir.nn.conv2d(w, x, padding=(1, 1)))
    assert not sequal(ir.add(x, x), ir.multiply(x, x))
    assert not sequal(ir.Tuple([x]), ir.Tuple([x, x]))
    assert not sequal(ir.TupleGetItem(ir.Tuple([x, x]), 0), ir.TupleGetItem(ir.Tuple([x, x]), 1))


def test_calls_of_functions_and_ifs():
    p, q = ir.var("p", t()), ir.var("q", t())
    x = ir.var("x", t())
    fa = ir.Function([p], ir.nn.relu(p), None, {"Primitive": 1})
    fb = ir.Function([q], ir.nn.relu(q), None, {"Primitive": 1})
    assert sequal(ir.Call(fa, [x]), ir.Call(fb, [x]))
    # an empty Attrs object equals the shared empty attrs (and hashes alike)
    assert sequal(ir.Call(fa, [x], ir.Attrs()), ir.Call(fb, [x]))
    assert not sequal(ir.Call(fa, [x], {"k": 1}), ir.Call(fb, [x]))
    cond = ir.var("c", t((), "bool"))
    i1 = ir.If(cond, ir.const(1.0), ir.Tuple([ir.const(2.0), ir.const(3.0)]))
    i2 = ir.If(cond, ir.const(1.0), ir.Tuple([ir.const(2.0), ir.const(3.0)]))
    assert sequal(i1, i2)
    assert not sequal(i1, ir.If(cond, ir.const(2.0), ir.Tuple([ir.const(2.0), ir.const(3.0)])))
    assert not sequal(i1, ir.If(ir.var("c", t((), "bool")), ir.const(1.0),
                                ir.Tuple([ir.const(2.0), ir.const(3.0)])))


def test_modules_compare_functions_by_name():
    def mod(name_a="main"):
        x = ir.var("x", t())
        m = ir.IRModule()
        m[name_a] = ir.Function([x], ir.nn.relu(x))
        y = ir.var("y", t())
        m["helper"] = ir.Function([y], ir.negative(y))
        return m

    assert sequal(mod(), mod())
    assert not sequal(mod(), mod("other"))
    a = mod()
    b = mod()
    gy = ir.var("z", t())
    b["helper"] = ir.Function([gy], gy)
    assert not sequal(a, b)
    assert not ir.structural_equal(a, a["main"])


def test_global_var_calls_in_modules():
    def build():
        m = ir.IRModule()
        y = ir.var("y", t())
        m["f"] = ir.Function([y], ir.negative(y))
        x = ir.var("x", t())
        m["main"] = ir.Function([x], ir.Call(m.get_global_var("f"), [x]))
        return m

    assert sequal(build(), build())


def test_infer_type_fills_annotations_that_are_then_compared():
    def build():
        x = ir.var("x", t())
        w = ir.var("w")
        return ir.Function([x, w], ir.nn.dense(x, w, units=4))

    a, b = build(), build()
    assert sequal(a, b)
    ir.infer_type(ir.IRModule.from_expr(a))
    assert not sequal(a, b)  # a's %w and return type are now annotated
    ir.infer_type(ir.IRModule.from_expr(b))
    assert sequal(a, b)


def test_assert_structural_equal_shows_both_texts():
    x = ir.var("x", t())
    assert_structural_equal(ir.add(x, x), ir.add(x, x))
    with pytest.raises(IRError, match="(?s)lhs.*add.*rhs.*multiply"):
        assert_structural_equal(ir.add(x, x), ir.multiply(x, x))


# --------------------------------------------------------------------------- deep graphs


def _chain(n, name="x"):
    x = ir.var(name, t((2,)))
    c = ir.const(np.ones(2, "float32"))
    e = x
    for _ in range(n):
        e = ir.add(e, c)
    return ir.Function([x], e)


def test_100k_deep_chain_equal_and_hash_without_recursion():
    a, b = _chain(100_000, "a"), _chain(100_000, "b")
    assert ir.structural_equal(a, b)
    assert ir.structural_hash(a) == ir.structural_hash(b)
    c = _chain(100_001)
    assert not ir.structural_equal(a, c)
    assert ir.structural_hash(a) != ir.structural_hash(c)


# --------------------------------------------------------------------------- properties


_UNARY = ("negative", "exp")
_BINARY = ("add", "subtract", "multiply", "maximum")


@st.composite
def programs(draw):
    """A recipe: a list of steps; each refers to earlier values by index."""
    n_params = draw(st.integers(1, 3))
    steps = []
    for i in range(draw(st.integers(1, 12))):
        avail = n_params + i
        kind = draw(st.sampled_from(["u", "b", "c", "let"]))
        if kind == "u":
            steps.append(("u", draw(st.sampled_from(_UNARY)), draw(st.integers(0, avail - 1))))
        elif kind == "b":
            steps.append(("b", draw(st.sampled_from(_BINARY)), draw(st.integers(0, avail - 1)),
                          draw(st.integers(0, avail - 1))))
        elif kind == "c":
            steps.append(("c", draw(st.sampled_from(_BINARY)), draw(st.integers(0, avail - 1)),
                          draw(st.floats(-4, 4, allow_nan=False, width=32))))
        else:
            steps.append(("let", draw(st.integers(0, avail - 1))))
    return n_params, steps


def build(recipe, names="p"):
    n_params, steps = recipe
    params = [ir.var(f"{names}{i}", t()) for i in range(n_params)]
    values = list(params)
    lets = []
    for s in steps:
        if s[0] == "u":
            values.append(getattr(ir, s[1])(values[s[2]]))
        elif s[0] == "b":
            values.append(getattr(ir, s[1])(values[s[2]], values[s[3]]))
        elif s[0] == "c":
            values.append(getattr(ir, s[1])(values[s[2]], ir.const(s[3], "float32")))
        else:
            v = ir.var(f"{names}_let{len(lets)}", t())
            lets.append((v, values[s[1]]))
            values.append(v)
    body = values[-1]
    for v, value in reversed(lets):
        body = ir.Let(v, value, body)
    return ir.Function(params, body)


@settings(max_examples=150, deadline=None)
@given(programs())
def test_equal_graphs_built_twice_are_equal_and_hash_equal(recipe):
    a, b = build(recipe, "a"), build(recipe, "b")
    assert ir.structural_equal(a, b)
    assert ir.structural_equal(b, a)
    assert ir.structural_hash(a) == ir.structural_hash(b)
    assert ir.structural_equal(a, a)


@settings(max_examples=150, deadline=None)
@given(programs(), programs())
def test_equality_is_symmetric_and_hash_consistent(r1, r2):
    a, b = build(r1, "a"), build(r2, "b")
    eq = ir.structural_equal(a, b)
    assert eq == ir.structural_equal(b, a)
    if eq:
        assert ir.structural_hash(a) == ir.structural_hash(b)


@settings(max_examples=100, deadline=None)
@given(programs(), st.integers(0, 11), st.floats(5, 9, width=32))
def test_changing_one_constant_breaks_equality(recipe, which, value):
    consts = [i for i, s in enumerate(recipe[1]) if s[0] == "c"]
    if not consts:
        return
    i = consts[which % len(consts)]
    steps = list(recipe[1])
    s = steps[i]
    steps[i] = (s[0], s[1], s[2], value)  # outside the drawn range [-4, 4]
    a, b = build(recipe, "a"), build((recipe[0], steps), "b")
    # the changed constant may sit in dead code (not reachable from the body)
    from passhost.ir.visitor import post_order

    reachable = any(type(n) is ir.Constant and float(n.data) == float(np.float32(value))
                    for n in post_order(b))
    assert ir.structural_equal(a, b) is (not reachable)


# --------------------------------------------------------------------------- bind_params_by_name


def _fn():
    x = ir.var("x", t((2,)))
    w = ir.var("w", t((2,)))
    b = ir.var("b")
    return ir.Function([x, w, b], ir.add(ir.multiply(x, w), ir.add(w, b)))


def test_bind_params_by_name_replaces_params_with_constants():
    f = _fn()
    wv = np.array([1.0, 2.0], "float32")
    g = ir.bind_params_by_name(f, {"w": wv})
    assert [p.name_hint for p in g.params] == ["x", "b"]
    consts = [n for n in ir.post_order(g) if type(n) is ir.Constant]
    assert len(consts) == 1  # one shared constant for both uses
    np.testing.assert_array_equal(consts[0].data, wv)
    x, b = g.params
    c = consts[0]
    assert ir.structural_equal(g, ir.Function([x, b], ir.add(ir.multiply(x, c), ir.add(c, b))))
    assert ir.bind_params_by_name(f, {}) is f
    # untyped parameters take any array
    h = ir.bind_params_by_name(f, {"b": np.zeros(2, "float32"), "w": wv})
    assert [p.name_hint for p in h.params] == ["x"]
    out = ir.evaluate(h, np.array([3.0, 4.0], "float32"))
    np.testing.assert_allclose(out, [3.0 + 1.0, 8.0 + 2.0])


def test_bind_params_by_name_keeps_ret_type_and_attrs():
    x = ir.var("x", t((2,)))
    w = ir.var("w", t((2,)))
    f = ir.Function([x, w], ir.add(x, w), t((2,)), {"Primitive": 1})
    g = ir.bind_params_by_name(f, {"w": np.ones(2, "float32")})
    assert g.ret_type == t((2,))
    assert dict(g.attrs) == {"Primitive": 1}


def test_bind_params_by_name_errors():
    f = _fn()
    with pytest.raises(IRError, match="no parameter of that name.*%x, %w, %b"):
        ir.bind_params_by_name(f, {"nope": np.zeros(2, "float32")})
    x1, x2 = ir.var("x", t((2,))), ir.var("x", t((2,)))
    dup = ir.Function([x1, x2], ir.add(x1, x2))
    with pytest.raises(IRError, match="2 parameters"):
        ir.bind_params_by_name(dup, {"x": np.zeros(2, "float32")})
    with pytest.raises(IRError, match="annotated Tensor\\[\\(2\\), float32\\].*float64"):
        ir.bind_params_by_name(f, {"w": np.zeros(2)})
    with pytest.raises(IRError, match="needs a Function"):
        ir.bind_params_by_name(ir.IRModule.from_expr(f), {"w": np.zeros(2, "float32")})
