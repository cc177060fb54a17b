"""Deep programs through the text format (issue 38 §3).

Each family of :mod:`passhost.testing.deep` nests one construct N deep -- tuples, tuple
types, functions (with and without parameters), lets (nested values and chains,
tuple-typed ones), ifs (in branches and in conditions), projections -- and must parse
(with type inference), print to text that grows linearly with the program, and parse
again to the same text, at the default recursion limit. Before the fix the printed text
of nested tuples and functions grew with the square of the depth (every level's
``/* ty=... */`` and ``-> T`` spelled out every deeper level: 150 MB at 10,000 deep),
and a 100,000-deep tuple type printed but did not parse back (type equality recursed).
The default run checks 20,000 deep, the slow set 100,000. How long each takes, and how
that grows with the depth, is measured by ``benchmarks/bench_nesting.py --deep`` (no
test times anything).
"""
from __future__ import annotations

import pytest

from passhost import ir
from passhost.ir.printer import MAX_TYPE_DEPTH
from passhost.testing.deep import DEEP_FAMILIES

tuples = DEEP_FAMILIES["tuples"]


FAMILIES = list(DEEP_FAMILIES.values())


def _round_trip(text):
    out = ir.astext(ir.parse(text))
    assert len(out) < 40 * len(text) + 10_000, "the printed text grows faster than the program"
    assert ir.astext(ir.parse(out)) == out


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.__name__)
def test_20k_deep_round_trips(family):
    _round_trip(family(20_000))


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.__name__)
def test_100k_deep_round_trips(family):
    _round_trip(family(100_000))


def test_a_100k_deep_tuple_type_prints_and_reads_back_structurally_equal():
    ty = ir.TensorType((), "float32")
    for _ in range(100_000):
        ty = ir.TupleType([ty])
    x = ir.var("x", ty)
    mod = ir.infer_type(ir.IRModule.from_expr(ir.Function([x], ir.TupleGetItem(x, 0))))
    back = ir.parse(ir.astext(mod))
    assert ir.structural_equal(back, mod)
    assert back["main"].params[0].type_annotation == ty


def test_deep_inferred_types_are_left_to_inference_shallow_ones_are_written():
    n = MAX_TYPE_DEPTH + 10
    text = ir.astext(ir.parse(tuples(n)))
    shallow = "(" * (MAX_TYPE_DEPTH - 1) + "float32" + ",)" * (MAX_TYPE_DEPTH - 1)
    assert f"/* ty={shallow} */" in text
    assert "(" * (MAX_TYPE_DEPTH + 1) + "float32" not in text  # neither as a comment nor as -> T
    assert ir.structural_equal(ir.parse(text), ir.parse(tuples(n)))


def _optimise(text, level):
    import passhost
    from passhost import transform

    mod = ir.parse(text)
    with transform.PassContext(opt_level=level, config={"passhost.verify_each": True}):
        out = passhost.default_pipeline(level)(mod)
    ir.parse(ir.astext(out))


@pytest.mark.parametrize("family", [DEEP_FAMILIES[k] for k in ("closures", "calls", "functions", "let_chain", "if_tuples")],
                         ids=lambda f: f.__name__)
def test_20k_deep_through_the_O3_pipeline(family):
    # nested closures through FuseOps compared each rebuilt level's function type with the
    # old one down to the bottom (type inference, then the verifier): minutes at 10,000
    _optimise(family(20_000), 3)


@pytest.mark.slow
@pytest.mark.parametrize("level", [0, 1, 2, 3])
@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.__name__)
def test_100k_deep_through_every_O_level(family, level):
    _optimise(family(100_000), level)


def _mutants(text, rnd, count):
    """Malformed (or differently typed) versions of ``text``: cut, a character dropped or
    doubled, a dtype or a name changed, a span repeated."""
    out = []
    for _ in range(count):
        i = rnd.randrange(len(text))
        kind = rnd.choice(["cut", "drop", "double", "dtype", "name", "repeat"])
        if kind == "cut":
            out.append(text[:i])
        elif kind == "drop":
            out.append(text[:i] + text[i + 1:])
        elif kind == "double":
            out.append(text[:i] + text[i] + text[i:])
        elif kind == "dtype":
            j = text.find("float32", i)
            out.append(text if j < 0 else text[:j] + "int32" + text[j + 7:])
        elif kind == "name":
            j = text.find("%", i)
            out.append(text if j < 0 else text[:j] + "%nope" + text[j + 2:])
        else:
            k = min(len(text), i + rnd.randrange(1, 200))
            out.append(text[:k] + text[i:k] + text[k:])
    return out


def _cli_on_mutants(tmp_path, capsys, n, count, seed):
    import random
    import re

    from passhost.cli import main

    rnd = random.Random(seed)
    path, out = tmp_path / "m.txt", tmp_path / "out.txt"
    for family in FAMILIES:
        for k, text in enumerate(_mutants(family(n), rnd, count)):
            path.write_text(text)
            code = main(["run", str(path), "-O3", "-o", str(out)])
            err = capsys.readouterr().err
            where = f"{family.__name__} mutant {k} (seed {seed}): exit {code}: {err[:300]}"
            assert code in (0, 1, 2), where
            assert "internal error" not in err and "Traceback" not in err, where
            if code == 2:
                assert re.match(rf"passhost: error: {re.escape(str(path))}:\d+:\d+: error: ", err), where


def test_malformed_deep_texts_at_the_cli(tmp_path, capsys):
    _cli_on_mutants(tmp_path, capsys, 2_000, 3, seed=38)


@pytest.mark.slow
def test_malformed_100k_deep_texts_at_the_cli(tmp_path, capsys):
    _cli_on_mutants(tmp_path, capsys, 100_000, 4, seed=380)
