"""docs/operators.md lists every core operator, and its example prints what it says."""
from __future__ import annotations

import re
from pathlib import Path

from passhost import ir

DOC = Path(__file__).resolve().parents[1] / "docs" / "operators.md"


def _documented() -> set:
    names = set()
    for row in DOC.read_text().splitlines():
        if row.startswith("| `"):
            names.update(re.match(r"\| `([^`]+)`", row).group(1).split())
    return names


def _core_ops() -> set:
    """Operators registered by the host's ``passhost.ir.ops`` (other tests register more)."""
    return {n for n in ir.list_ops()
            if getattr(ir.Op.get(n).definition.type_rel, "__module__", "").startswith("passhost.ir.ops.")}


def test_every_core_operator_is_in_the_reference():
    assert {"add", "nn.conv2d", "argmax"} <= _core_ops()
    missing = sorted(_core_ops() - _documented())
    assert not missing, f"add these operators to docs/operators.md: {missing}"


def test_the_reference_names_only_registered_operators():
    unknown = sorted(_documented() - set(ir.list_ops()))
    assert not unknown, f"docs/operators.md lists unregistered operators: {unknown}"


def test_the_example_prints_as_shown():
    text = DOC.read_text()
    code, shown = re.findall(r"```python\n(.*?)```\n\n```\n(.*?)```", text, re.S)[0]
    lines: list = []
    exec(compile(code, str(DOC), "exec"), {"print": lambda *a: lines.append(" ".join(map(str, a)))})
    assert "\n".join(lines).strip() == shown.strip()
