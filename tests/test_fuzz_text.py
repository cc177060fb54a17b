"""A seeded fuzzer over the text format (issue 18 §4).

Every mutant of a valid text either parses and prints back to an equal module (printing
the re-parsed module gives the same text again), or raises a :class:`ParseError` with a
line and column, within a time bound (a hang fails the test instead of stalling it). Any
other exception is a defect.

The corpus is the valid texts written in the suite's own test files, a handful of
syntax-rich programs below, and seeded random graphs (lets, tuples, convolutions) as the
printer writes them. Mutations are token- and character-level: delete, duplicate, swap or
insert spans, splice tokens from elsewhere in the corpus, blow up numbers and nesting.

Quick mode (CI): ``FUZZ_MUTANTS`` mutants from seed ``FUZZ_SEED``. Long mode:
``pytest tests/test_fuzz_text.py --fuzz-mutants 20000 --fuzz-seed 7``. A failure names the
seed and mutant index, which reproduce it alone (``--fuzz-only INDEX``).
"""
from __future__ import annotations

import ast
import random
import re
import signal
from pathlib import Path


from passhost import ir
from passhost.errors import ParseError
from passhost.testing.random_graph import random_graph

FUZZ_MUTANTS = 2000
FUZZ_SEED = 18
#: seconds one mutant may take to parse, print and re-parse; far above any real case (the
#: largest corpus text parses in milliseconds), so only a hang or a blow-up trips it
TIME_BOUND = 20

HEAD = '#[version = "0.0.5"]\n'
HANDWRITTEN = [
    HEAD + 'def @main(%x: Tensor[(2, 3), float32], %c: bool) -> Tensor[(2, 3), float32] {\n'
    '  %0 = fn (%a: Tensor[(2, 3), float32], Primitive=1) { nn.relu(%a) };\n'
    '  %1 = %0(%x);\n'
    '  let %t: (Tensor[(2, 3), float32], float32) = (%1, -2.5f);\n'
    '  if (%c) { add(%t.0, %t.1) } else { multiply(%x, nanf) }\n'
    '}\n',
    HEAD + 'def @f(%y: int64) -> int64 { %y }\n\n'
    'def @main(%x: int64, %s: int16) {\n'
    '  free_var %z: int32;\n'
    '  (@f(%x), %s, %z, 42i64, -7i16, True, 3f16, 1e-05f64)\n'
    '}\n',
    HEAD + 'def @main(%x: Tensor[(1, 4, 8, 8), float32]) {\n'
    '  %0 = nn.conv2d(%x, meta[relay.Constant][0], padding=[1, 1, 1, 1], channels=4, kernel_size=[3, 3]);\n'
    '  %1 = nn.max_pool2d(%0, pool_size=[2, 2], strides=[2, 2], layout="NCHW");\n'
    '  %2 = reshape(%1, newshape=[1, -1]);\n'
    '  %3 = sum(%2, axis=[1], keepdims=True);\n'
    '  %4 = split(%2, indices_or_sections=2, axis=1);\n'
    '  concatenate((%4.1, %4.0), axis=1) + %3\n'
    '}\n\n#[metadata]\n{\n  "relay.Constant": [\n'
    '    {"dtype": "float32", "shape": [4, 4, 3, 3], "data": "' + "A" * 768 + '"}\n  ]\n}\n',
    HEAD + 'def @main(%x: float32) {\n  let %f = fn (%n: int32, %d: float32) -> float32 { %d };\n'
    '  %f(3, %x) * (%x - -%x) / 2f\n}\n',
]


def _suite_texts() -> list:
    """The valid text-format programs written out in the suite's test files."""
    texts = []
    for path in sorted(Path(__file__).parent.glob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Constant) and isinstance(node.value, str) and HEAD.strip() in node.value
                    and len(node.value) < 20_000):
                try:
                    ir.parse(node.value)
                except Exception:  # an error case of its test: not corpus
                    continue
                texts.append(node.value)
    return texts


def corpus() -> list:
    texts = _suite_texts() + HANDWRITTEN
    for seed in range(6):
        texts.append(ir.astext(random_graph(seed, 10, lets=seed % 2 == 0, tuples=seed % 3 == 0)))
    return texts


_TOKEN = re.compile(r'"[^"\n]*"|%[A-Za-z0-9_./]+|@[A-Za-z0-9_.]+|[A-Za-z_][A-Za-z0-9_.]*|-?[0-9][0-9.eE+\-]*[a-z0-9]*'
                    r'|->|\S')
_SPICE = ["(", ")", "{", "}", "[", "]", ",", ";", "=", "let", "if", "else", "fn", "%0", "%x", "@main", "@",
          "meta[relay.Constant][0]", "-", "--", ".", ".0", ".99", "Tensor[", "(float32, ", "_", "free_var",
          "nanf", "-nanf", "inff", "1e400f", "9" * 30, "9" * 4400, "\x00", "\xff", "\u2028", "\\", '"', "#[", "/*", "*/"]


def mutate(text: str, rnd: random.Random, pool: list) -> str:
    """One to three random edits of ``text``."""
    for _ in range(rnd.randint(1, 3)):
        n = len(text)
        if n == 0:
            return rnd.choice(_SPICE)
        a = rnd.randrange(n)
        b = min(n, a + rnd.choice([1, 1, 2, 5, 20, 200]))
        op = rnd.randrange(9)
        if op == 0:      # delete a span
            text = text[:a] + text[b:]
        elif op == 1:    # duplicate a span
            text = text[:b] + text[a:b] + text[b:]
        elif op == 2:    # insert a spice token
            text = text[:a] + rnd.choice(_SPICE) + text[a:]
        elif op == 3:    # splice a token from the corpus
            text = text[:a] + " " + rnd.choice(pool) + " " + text[a:]
        elif op == 4:    # swap two tokens
            toks = _TOKEN.findall(text)
            if len(toks) > 2:
                i, j = rnd.randrange(len(toks)), rnd.randrange(len(toks))
                toks[i], toks[j] = toks[j], toks[i]
                text = " ".join(toks)
        elif op == 5:    # a number becomes huge, negative or odd
            m = list(re.finditer(r"[0-9]+", text))
            if m:
                hit = rnd.choice(m)
                text = text[:hit.start()] + rnd.choice(["-1", "0", "9" * 25, "99999999999", "1.5", "-0"]) \
                    + text[hit.end():]
        elif op == 6:    # nest brackets deeply
            k = rnd.choice([3, 50, 2000])
            o, c = rnd.choice([("(", ")"), ("[", "]"), ("{", "}")])
            text = text[:a] + o * k + text[a:b] + c * k + text[b:]
        elif op == 7:    # truncate
            text = text[:a]
        else:            # replace one character
            text = text[:a] + rnd.choice("%@(){}[],;=.-_0aZ \n\t\"#") + text[a + 1:]
    return text


class _Hang(Exception):
    pass


def _alarm(signum, frame):
    raise _Hang()


def check_mutant(text: str) -> str:
    """``"ok"`` or ``"error"``; raises AssertionError on a broken promise."""
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(TIME_BOUND)
    try:
        try:
            mod = ir.parse(text, source_name="mutant.txt")
        except ParseError as err:
            assert err.line >= 1 and err.column >= 1, f"ParseError without a location: {err}"
            assert err.source_name == "mutant.txt"
            return "error"
        printed = ir.astext(mod)
        again = ir.parse(printed, source_name="printed.txt")
        assert ir.structural_equal(again, mod, map_free_vars=True), "print/parse changed the module"
        assert ir.astext(again) == printed, "printing the re-parsed module gave other text"
        return "ok"
    except _Hang:
        raise AssertionError(f"no answer within {TIME_BOUND} s") from None
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def test_corpus_is_valid_and_varied():
    texts = corpus()
    assert len(texts) >= 20
    for text in texts:
        assert check_mutant(text) == "ok"


def test_mutants_parse_and_round_trip_or_fail_with_a_location(request):
    mutants = request.config.getoption("--fuzz-mutants") or FUZZ_MUTANTS
    seed = request.config.getoption("--fuzz-seed")
    seed = FUZZ_SEED if seed is None else seed
    only = request.config.getoption("--fuzz-only")
    texts = corpus()
    pool = sorted({t for text in texts for t in _TOKEN.findall(text) if len(t) < 40})
    outcomes = {"ok": 0, "error": 0}
    for index in range(mutants):
        rnd = random.Random(f"{seed}:{index}")
        text = mutate(rnd.choice(texts), rnd, pool)
        if only is not None and index != only:
            continue
        try:
            outcomes[check_mutant(text)] += 1
        except Exception as err:  # any exception but a located ParseError is a defect
            raise AssertionError(f"mutant {index} of seed {seed} (rerun: --fuzz-seed {seed} --fuzz-only {index}): "
                                 f"{type(err).__name__}: {err}\n--- mutant ---\n{text[:3000]}") from err
    if only is None:
        # both outcomes occur: the mutations neither always break nor never break the text
        assert outcomes["ok"] > 0 and outcomes["error"] > 0, outcomes
