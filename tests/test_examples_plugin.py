"""The demonstration passes of examples/passhost-demo-passes, installed as a user would
(pip, real entry points), give the outputs docs/cli.md and docs/instruments.md show."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from passhost.testing import pip_install, run_passhost

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "examples" / "passhost-demo-passes"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    return pip_install(tmp_path_factory.mktemp("demo-site"), DEMO)


def _console(page: str, command: str) -> list:
    """The output lines the page shows after ``$ <command>``."""
    text = (ROOT / "docs" / page).read_text()
    at = text.index("$ " + command + "\n") + len(command) + 3
    lines = []
    for line in text[at:].splitlines():
        if line.startswith("$ ") or line.startswith("```"):
            break
        lines.append(line)
    return lines


def _same(shown: str, got: str) -> bool:
    """Equal but for the timestamped crash directory."""
    pattern = re.escape(shown).replace(re.escape("/tmp/passhost-crash-20261122-052455"), r"\S+passhost-crash-[0-9-]+")
    return re.fullmatch(pattern, got) is not None


def test_bisect_finds_sign_flip_as_the_docs_show(site, tmp_path):
    (tmp_path / "model.txt").write_text((DEMO / "model.txt").read_text())
    cmd = "passhost bisect model.txt -p InferType,FoldConstant,SignFlip,EliminateCommonSubexpr -o bisect-out"
    r = run_passhost(site, *cmd.split()[1:], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == _console("cli.md", cmd)


def test_crash_leaves_a_reproducer_as_the_docs_show(site, tmp_path):
    (tmp_path / "model.txt").write_text((DEMO / "model.txt").read_text())
    cmd = "passhost run model.txt -O3 -p FoldConstant,Crash,EliminateCommonSubexpr"
    r = run_passhost(site, *cmd.split()[1:], cwd=tmp_path, TMPDIR=str(tmp_path))
    assert r.returncode == 1
    [shown] = _console("cli.md", cmd)
    assert _same(shown, r.stderr.strip()), r.stderr
    where = re.search(r"--reproduce (\S+)\)", r.stderr).group(1)
    replay = run_passhost(site, "run", "--reproduce", where, cwd=tmp_path)
    assert replay.returncode == 1
    assert replay.stderr.strip() == _console("cli.md", "passhost run --reproduce /tmp/passhost-crash-20261122-052455")[0]


def test_verify_numerics_blames_sign_flip_as_the_docs_show(site, tmp_path):
    (tmp_path / "model.txt").write_text((DEMO / "model.txt").read_text())
    cmd = "passhost run model.txt -p Keep,SignFlip,Keep --instrument verify-numerics --no-meta-data"
    r = run_passhost(site, *cmd.split()[1:], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stderr.splitlines()[0] == _console("instruments.md", cmd)[0]
