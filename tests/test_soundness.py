"""check_rule / passhost check-rules: deliberately wrong rules are caught with a small
counterexample; sound rules (and the shipped ones) raise no alarm."""
from __future__ import annotations

import pytest

from passhost import ir
from passhost.ir.pattern import is_op, rule
from passhost.ir.pattern.soundness import check_rule


def _const_is(value):
    return lambda c: isinstance(c, ir.Constant) and c.data.size == 1 and float(c.data.reshape(())) == value


# (name, pattern function, replacement, check): each is wrong for some input
WRONG = [
    ("mul_by_any_constant_is_x", lambda x, c: is_op("multiply")(x, c), lambda x, c: x, None),
    ("add_any_constant_is_x", lambda x, c: is_op("add")(x, c), lambda x, c: x, None),
    ("subtract_commutes", lambda x, y: is_op("subtract")(x, y), lambda x, y: ir.subtract(y, x), None),
    ("divide_is_multiply", lambda x, y: is_op("divide")(x, y), lambda x, y: ir.multiply(x, y), None),
    ("relu_is_identity", lambda x: is_op("nn.relu")(x), lambda x: x, None),
    ("sigmoid_is_tanh", lambda x: is_op("sigmoid")(x), lambda x: ir.tanh(x), None),
    ("maximum_is_first", lambda x, y: is_op("maximum")(x, y), lambda x, y: x, None),
    ("minimum_is_maximum", lambda x, y: is_op("minimum")(x, y), lambda x, y: ir.maximum(x, y), None),
    ("bad_distribution", lambda x, y, z: is_op("multiply")(is_op("add")(x, y), z),
     lambda x, y, z: ir.add(ir.multiply(x, z), y), None),
    ("sqrt_of_square_is_x", lambda x: is_op("sqrt")(is_op("multiply")(x, x)), lambda x: x, None),
    ("abs_is_identity", lambda x: is_op("abs")(x), lambda x: x, None),
    ("double_negation_keeps_one", lambda x: is_op("negative")(is_op("negative")(x)), lambda x: ir.negative(x), None),
    ("x_minus_x_is_x", lambda x: is_op("subtract")(x, x), lambda x: x, None),
    ("exp_is_x_plus_one", lambda x: is_op("exp")(x), lambda x: ir.add(x, ir.const(1.0)), None),
    ("floor_is_round", lambda x: is_op("floor")(x), lambda x: ir.round(x), None),
    ("square_is_double", lambda x: is_op("multiply")(x, x), lambda x: ir.add(x, x), None),
    ("sum_is_mean", lambda x: is_op("sum")(x), lambda x: ir.mean(x), None),
    ("mul_one_check_forgets_value", lambda x, c: is_op("multiply")(x, c), lambda x, c: x,
     lambda x, c: isinstance(c, ir.Constant)),
    ("add_zero_checks_the_wrong_value", lambda x, c: is_op("add")(x, c), lambda x, c: x, lambda x, c: _const_is(1.0)(c)),
    ("transpose_twice_is_identity", lambda x: is_op("transpose")(is_op("transpose")(x)), lambda x: x, None),
    ("log_exp_swap", lambda x: is_op("log")(is_op("exp")(x)), lambda x: ir.exp(x), None),
    ("tanh_is_clip", lambda x: is_op("tanh")(x), lambda x: ir.clip(x, -1.0, 1.0), None),
    ("gelu_accepts_any_half", lambda x, half, one, k: is_op("multiply")(is_op("multiply")(x, half),
                                                                         is_op("add")(is_op("erf")(is_op("multiply")(x, k)), one)),
     lambda x, **_: ir.nn.gelu(x), lambda x, half, one, k: _const_is(1.0)(one) and isinstance(half, ir.Constant)
     and isinstance(k, ir.Constant) and half.data.size == 1 and k.data.size == 1
     and abs(float(k.data.reshape(())) - 2 ** -0.5) < 1e-6),
]

SOUND = [
    ("mul_one", lambda x, c: is_op("multiply")(x, c), lambda x, c: x, lambda x, c: _const_is(1.0)(c)),
    ("add_zero", lambda x, c: is_op("add")(x, c), lambda x, c: x, lambda x, c: _const_is(0.0)(c)),
    ("double_negation", lambda x: is_op("negative")(is_op("negative")(x)), lambda x: x, None),
    ("subtract_to_add_negative", lambda x, y: is_op("subtract")(x, y), lambda x, y: ir.add(x, ir.negative(y)), None),
    ("square", lambda x: is_op("multiply")(x, x), lambda x: ir.power(x, ir.const(2.0)),
     lambda x: x.checked_type.dtype == "float32"),
]


def _rule(name, pattern, replacement, check):
    return rule(pattern, replacement, check, name=name)


@pytest.mark.parametrize("name,pattern,replacement,check", WRONG, ids=[w[0] for w in WRONG])
def test_a_wrong_rule_is_caught_with_a_counterexample(name, pattern, replacement, check):
    report = check_rule(_rule(name, pattern, replacement, check), max_seconds=8.0)
    assert report.sound is False, f"{name}: {report.trials} trials, fired {report.fired}, no counterexample"
    text = str(report.counterexample)
    assert "before:" in text and "after:" in text


def test_counterexamples_are_small():
    report = check_rule(_rule(*WRONG[0]))
    assert report.counterexample is not None
    assert "Tensor[(1), float32]" in report.counterexample.before or "float32 */" in report.counterexample.before


@pytest.mark.parametrize("name,pattern,replacement,check", SOUND, ids=[s[0] for s in SOUND])
def test_a_sound_rule_raises_no_alarm(name, pattern, replacement, check):
    report = check_rule(_rule(name, pattern, replacement, check))
    assert report.counterexample is None, str(report.counterexample)
    assert report.sound is True and report.fired > 0


def test_a_rule_that_crashes_is_reported():
    def boom(x):
        raise ValueError("boom")

    report = check_rule(rule(lambda x: is_op("exp")(x), boom, name="crashes"))
    assert report.sound is False and "raised ValueError: boom" in str(report.counterexample)


def test_a_rule_that_changes_the_type_is_reported():
    report = check_rule(rule(lambda x: is_op("cast")(x), lambda x: x, name="drop_any_cast"))
    assert report.sound is False


def test_shipped_rules_raise_no_false_alarm_and_are_exercised():
    import passhost

    checked = 0
    for name in passhost.passes.names():
        rules = passhost.passes.rules(name)
        for r in rules:
            report = check_rule(r)
            assert report.counterexample is None, f"{name}/{r.name}: {report.counterexample}"
            assert report.fired > 0, f"{name}/{r.name} never fired in {report.trials} trials"
            checked += 1
    assert checked >= 6


class _RulePlugin:
    def __init__(self, entries):
        self.entries = entries

    from passhost import hookimpl as _hookimpl

    @_hookimpl
    def passhost_register_passes(self):
        return list(self.entries)


def test_check_rules_command_exits_1_on_a_wrong_rule_and_names_it(capsys):
    from passhost import transform
    from passhost.cli import main
    from passhost.hookspecs import PassEntry
    from passhost.registry import Registry, use_registry

    def wrong():
        return transform.pattern_pass("Wrong", [rule(lambda x, c: is_op("add")(x, c), lambda x, c: x, name="drop_add")])

    def right():
        return transform.pattern_pass("Right", [rule(lambda x: is_op("negative")(is_op("negative")(x)), lambda x: x,
                                                     name="neg_neg")])

    reg = Registry(load_entrypoints=False)
    reg.register_plugin(_RulePlugin([PassEntry("Wrong", wrong), PassEntry("Right", right)]), "rules",
                        distribution="rules-dist", version="1.0")
    with use_registry(reg):
        assert main(["check-rules", "Right"]) == 0
        out = capsys.readouterr().out
        assert "neg_neg" in out and "sound" in out and "1 sound, 0 unsound" in out
        assert main(["check-rules"]) == 1
        out = capsys.readouterr().out
        assert "UNSOUND" in out and "Wrong/drop_add: the numbers change" in out and "inputs: %" in out
        assert main(["check-rules", "Nope"]) == 2
        capsys.readouterr()
