"""Installing outside the checkout (issue 15): scripts/build-dists.sh, the passhost-standard
meta-distribution, version ranges that resolve, and the plugin API range (passhost.API_VERSION).

The real ``pip install --find-links dist passhost-standard`` into a fresh venv, with a
third-party pack on top, is CI's "release path" step (.ci/run); it needs the package index
for numpy, pluggy and onnx. Here: what can be checked offline.
"""
from __future__ import annotations

import importlib
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import passhost
from passhost import compat, hookimpl
from passhost.hookspecs import PassEntry
from passhost.registry import Registry
from passhost.transform import module_pass

try:
    import tomllib
except ImportError:  # Python 3.10
    tomllib = None

ROOT = Path(__file__).resolve().parents[1]
PLUGINS = sorted(p.parent for p in ROOT.glob("plugins/*/pyproject.toml"))
needs_tomllib = pytest.mark.skipif(tomllib is None, reason="tomllib needs Python >= 3.11")


def project(path: Path) -> dict:
    return tomllib.loads((path / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def requirement(deps: list, name: str) -> str:
    """The version range ``deps`` gives ``name`` (``""`` if unversioned)."""
    for dep in deps:
        m = re.fullmatch(rf"{re.escape(name)}\s*([<>=!~].*)?", dep.strip())
        if m:
            return (m.group(1) or "").replace(" ", "")
    raise AssertionError(f"no requirement on {name!r} in {deps}")


# -- the plugin API range ------------------------------------------------------------------
@pytest.mark.parametrize("version, spec, ok", [
    ("1.0", ">=1.0,<2", True), ("1.7", ">=1.0,<2", True), ("2.0", ">=1.0,<2", False),
    ("1.0", ">=1.1", False), ("1.0", "==1.*", True), ("2.1", "==1.*", False), ("1.0", "!=1.0", False),
    ("1.4", "~=1.2", True), ("2.0", "~=1.2", False), ("1.0", "<=1", True), ("1.0", ">1.0", False),
])
def test_in_range_reads_pip_style_ranges(version, spec, ok):
    assert compat.in_range(version, spec) is ok


@pytest.mark.parametrize("spec", ["", "1.0", ">=one", ">=1.0;<2", ">=1.*", 2])
def test_a_malformed_range_is_refused_with_the_syntax(spec):
    with pytest.raises(ValueError, match="PASSHOST_API"):
        compat.parse_range(spec)


class Plugin:
    def __init__(self, api=None):
        if api is not None:
            self.PASSHOST_API = api

    @hookimpl
    def passhost_register_passes(self):
        yield PassEntry("Later", lambda: module_pass(lambda mod, ctx: mod, opt_level=0, name="Later"))


@pytest.mark.parametrize("api, reason", [
    (">=2.0", "it supports passhost API >=2.0, and this passhost"),
    ("<1.0", "it supports passhost API <1.0"),
    ("soon", "PASSHOST_API = 'soon' is not a version range"),
    (2, "PASSHOST_API must be a version range such as '>=1.0,<2', got 2"),
])
def test_a_plugin_outside_the_host_api_is_broken_with_the_reason(api, reason):
    reg = Registry(load_entrypoints=False)
    assert reg.register_plugin(Plugin(api), "future", distribution="future-pack", version="9.0") is False
    [broken] = reg.broken
    assert broken.distribution == "future-pack" and reason in broken.error
    assert "Later" not in reg.pass_names()


@pytest.mark.parametrize("api", [None, ">=1.0,<2", f"=={compat.API_VERSION}"])
def test_a_plugin_inside_the_range_or_silent_about_it_loads(api):
    reg = Registry(load_entrypoints=False)
    assert reg.register_plugin(Plugin(api), "fine", distribution="fine-pack", version="1.0")
    assert reg.pass_names() == ["Later"]


def test_the_api_version_is_public():
    assert passhost.API_VERSION == compat.API_VERSION and re.fullmatch(r"\d+\.\d+", passhost.API_VERSION)


# -- the first-party distributions -----------------------------------------------------------
@needs_tomllib
@pytest.mark.parametrize("path", PLUGINS, ids=lambda p: p.name)
def test_every_plugin_declares_a_host_range_and_an_api_range_that_hold(path):
    meta = project(path)
    host_range = requirement(meta["dependencies"], "passhost")
    assert host_range and compat.in_range(passhost.__version__.split("+")[0], host_range), host_range
    for module in meta["entry-points"]["passhost"].values():
        api = getattr(importlib.import_module(module), "PASSHOST_API", None)
        assert api is not None, f"{module} declares no PASSHOST_API"
        assert compat.in_range(passhost.API_VERSION, api)


@needs_tomllib
def test_passhost_standard_pulls_the_host_and_every_first_party_plugin():
    meta = project(ROOT / "dists" / "passhost-standard")
    names = {re.split(r"[<>=!~ ]", d, maxsplit=1)[0] for d in meta["dependencies"]}
    assert names == {"passhost"} | {project(p)["name"] for p in PLUGINS}
    for p in [ROOT, *PLUGINS]:
        m = project(p)
        assert compat.in_range(m["version"], requirement(meta["dependencies"], m["name"])), m["name"]


def test_build_dists_builds_every_project_and_their_requirements_resolve_among_them(tmp_path):
    out = tmp_path / "dist"
    result = subprocess.run(["bash", str(ROOT / "scripts" / "build-dists.sh"), str(out)], capture_output=True,
                            text=True, env={"PYTHON": sys.executable, "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr
    wheels = sorted(out.glob("*.whl"))
    assert len(wheels) == len(PLUGINS) + 2 == len(list(out.glob("*.tar.gz")))  # + host + passhost-standard
    built, needs = {}, []
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as z:
            text = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))).decode()
        name = re.search(r"^Name: (.+)$", text, re.M).group(1).strip()
        built[name] = re.search(r"^Version: (.+)$", text, re.M).group(1).strip()
        needs += [(name, m.group(1), m.group(2).replace(" ", "") or "")
                  for m in re.finditer(r"^Requires-Dist: (passhost[\w-]*)\s*\(?([^;)\n]*)\)?", text, re.M)]
    assert {"passhost", "passhost-standard", "passhost-fold-constant", "passhost-onnx"} <= set(built)
    for who, dep, spec in needs:
        assert dep in built, f"{who} requires {dep}, which build-dists did not build"
        assert not spec or compat.in_range(built[dep], spec), f"{who} requires {dep}{spec}; built {built[dep]}"
