"""docs/performance.md stays the current figures and how to get them (issue 33 item 5):
short, with the history in docs/performance-log.md, and every command it gives runs a
benchmark script that exists with options that script takes."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "performance.md"
COMMAND = re.compile(r"(?:python -m benchmarks\b|(?:python )?benchmarks/(\w+)\.py)([^`\n#|\]]*)")


def _commands(text: str) -> list:
    """``(script path, [--options])`` for every benchmark command the page gives."""
    out = []
    for m in COMMAND.finditer(text):
        script = ROOT / "benchmarks" / (f"{m.group(1)}.py" if m.group(1) else "run.py")
        out.append((script, re.findall(r"(--[a-z][a-z-]*)", m.group(2))))
    return out


def test_the_page_is_short_and_points_at_its_history():
    text = PAGE.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 300
    assert "(performance-log.md)" in text and (ROOT / "docs" / "performance-log.md").is_file()
    assert "## Dynamic axes" in text and "python benchmarks/bench_onnx.py --models dynamic" in text


def test_every_command_runs_a_script_that_takes_its_options():
    commands = _commands(PAGE.read_text(encoding="utf-8"))
    assert len(commands) >= 10
    for script, options in commands:
        assert script.is_file(), f"docs/performance.md runs {script.name}, which does not exist"
        source = script.read_text(encoding="utf-8")
        for option in options:
            assert f'"{option}"' in source, f"{script.name} takes no {option}"
    # the A/B scripts the page names exist too
    for name in re.findall(r"`benchmarks/(\w+)\.py", PAGE.read_text(encoding="utf-8")):
        assert (ROOT / "benchmarks" / f"{name}.py").is_file(), name
