"""Real installed plugins: throwaway distributions are built with pip into a temporary
``--target`` directory and the ``passhost`` command runs in a subprocess with that
directory on ``PYTHONPATH``, so discovery goes through actual entry points."""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from passhost.testing import make_dist, pip_install, run_passhost

ROOT = Path(__file__).resolve().parents[1]

PASS_MODULE = '''
"""Test plugin {dist}."""
from passhost import hookimpl
from passhost.hookspecs import InstrumentEntry, PassEntry
from passhost.instrument import PassInstrument
from passhost.transform import module_pass


@module_pass(opt_level=2, name="{pass_name}", required=["InferType"])
def the_pass(mod, ctx):
    """{pass_name}: return the module unchanged."""
    return mod


class Count(PassInstrument):
    """Count the passes that ran."""

    def __init__(self):
        self.count = 0

    def run_after_pass(self, mod, info):
        self.count += 1

    def render(self):
        return f"{{self.count}} passes ran"


@hookimpl
def passhost_register_passes():
    yield PassEntry("{pass_name}", lambda: the_pass)


@hookimpl
def passhost_register_instruments():
    yield InstrumentEntry("{instrument}", Count)
'''

def listing(target: Path, **env: str) -> dict:
    result = run_passhost(target, "list", "--json", **env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    src = tmp_path_factory.mktemp("src")
    target = tmp_path_factory.mktemp("site")
    pip_install(
        target,
        make_dist(src, "passhost-zz-good", "zz-good",
                  PASS_MODULE.format(dist="good", pass_name="ZzGood", instrument="zz-count")),
        make_dist(src, "passhost-zz-broken", "zz-broken", "import a_module_that_is_not_installed\n"),
        make_dist(src, "passhost-zz-clash-a", "zz-clash-a",
                  PASS_MODULE.format(dist="a", pass_name="ZzClash", instrument="zz-a-count")),
        make_dist(src, "passhost-zz-clash-b", "zz-clash-b",
                  PASS_MODULE.format(dist="b", pass_name="ZzClash", instrument="zz-b-count"), version="1.0"),
    )
    return target


def test_installed_plugins_are_discovered_with_their_provenance(installed):
    doc = listing(installed)
    [good] = [p for p in doc["passes"] if p["name"] == "ZzGood"]
    assert {k: good[k] for k in ("kind", "opt_level", "required", "plugin", "distribution", "version",
                                 "requirement", "summary")} == {
        "kind": "pass", "opt_level": 2, "required": ["InferType"], "plugin": "zz-good",
        "distribution": "passhost-zz-good", "version": "0.4.2", "requirement": "passhost-zz-good==0.4.2",
        "summary": "ZzGood: return the module unchanged."}
    [count] = [i for i in doc["instruments"] if i["name"] == "zz-count"]
    assert (count["distribution"], count["summary"]) == ("passhost-zz-good", "Count the passes that ran.")
    table = run_passhost(installed, "list").stdout
    assert re.search(r"^ZzGood +pass +2 +InferType +- +passhost-zz-good==0\.4\.2 +ZzGood: return", table, re.M)


def test_an_installed_plugin_runs_from_the_command_line(installed):
    result = run_passhost(installed, "run", "--example", "tutorial", "-p", "ZzGood", "--instrument", "zz-count",
                      "--no-meta-data")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith('#[version = "0.0.5"]')
    warnings, report = result.stderr.splitlines()[:-1], result.stderr.splitlines()[-1]
    assert report == "3 passes ran"  # the Sequential, the required InferType, ZzGood
    # the broken plugin and the clash are named once each, one line apiece
    assert warnings == [
        "passhost: warning: plugin passhost-zz-broken 0.4.2 (entry point 'zz-broken') failed to load: "
        "ModuleNotFoundError: No module named 'a_module_that_is_not_installed' (left out; see `passhost list`)",
        "passhost: warning: pass 'ZzClash' is registered 2 times: by passhost-zz-clash-a 0.4.2 (entry point "
        "'zz-clash-a') and by passhost-zz-clash-b 1.0 (entry point 'zz-clash-b'); uninstall (or disable with "
        "PASSHOST_DISABLE_PLUGINS) all but one of them"]


def test_a_broken_plugin_is_listed_and_isolated(installed):
    doc = listing(installed)
    [broken] = [b for b in doc["broken"] if b["plugin"] == "zz-broken"]
    assert broken == {"plugin": "zz-broken", "distribution": "passhost-zz-broken", "version": "0.4.2",
                      "requirement": "passhost-zz-broken==0.4.2",
                      "error": "ModuleNotFoundError: No module named 'a_module_that_is_not_installed'"}
    table = run_passhost(installed, "list").stdout
    assert ("plugin passhost-zz-broken 0.4.2 (entry point 'zz-broken') failed to load: "
            "ModuleNotFoundError: No module named 'a_module_that_is_not_installed'") in table
    strict = run_passhost(installed, "--strict-plugins", "list")
    assert strict.returncode == 2 and strict.stdout == ""
    assert strict.stderr.startswith("passhost: error: plugin ") and strict.stderr.count("\n") == 1


def test_a_name_clash_is_reported_naming_both_plugins(installed):
    doc = listing(installed)
    [clash] = [c for c in doc["conflicts"] if c["name"] == "ZzClash"]
    assert clash["error"] == (
        "pass 'ZzClash' is registered 2 times: by passhost-zz-clash-a 0.4.2 (entry point 'zz-clash-a') and by "
        "passhost-zz-clash-b 1.0 (entry point 'zz-clash-b'); uninstall (or disable with "
        "PASSHOST_DISABLE_PLUGINS) all but one of them")
    assert "ZzClash" not in [p["name"] for p in doc["passes"]]
    result = run_passhost(installed, "run", "--example", "tutorial", "-p", "ZzClash")
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1] == f"passhost: error: {clash['error']}"


def test_disable_plugins_by_entry_point_name(installed):
    doc = listing(installed, PASSHOST_DISABLE_PLUGINS="zz-broken, zz-clash-b")
    assert not [b for b in doc["broken"] if b["plugin"].startswith("zz-")]
    [clash] = [p for p in doc["passes"] if p["name"] == "ZzClash"]
    assert clash["distribution"] == "passhost-zz-clash-a"
    assert sorted(d["plugin"] for d in doc["disabled"]) == ["zz-broken", "zz-clash-b"]


def test_disable_plugin_autoload(installed):
    doc = listing(installed, PASSHOST_DISABLE_PLUGIN_AUTOLOAD="1")
    assert (doc["passes"], doc["instruments"], doc["broken"]) == ([], [], [])
    result = run_passhost(installed, "run", "--example", "tutorial", "-p", "ZzGood",
                      PASSHOST_DISABLE_PLUGIN_AUTOLOAD="1")
    assert result.returncode == 2 and "unknown pass 'ZzGood'" in result.stderr


def test_removing_a_distribution_removes_its_names(tmp_path):
    target = tmp_path / "site"
    dist = make_dist(tmp_path, "passhost-zz-removable", "zz-removable",
                     PASS_MODULE.format(dist="r", pass_name="ZzRemovable", instrument="zz-r-count"))
    pip_install(target, dist)
    assert "ZzRemovable" in [p["name"] for p in listing(target)["passes"]]
    # what `pip uninstall` does: the module and its .dist-info (entry points) go away
    for path in target.glob("passhost_zz_removable*"):
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    doc = listing(target)
    assert "ZzRemovable" not in [p["name"] for p in doc["passes"]]
    assert "zz-r-count" not in [i["name"] for i in doc["instruments"]]
    result = run_passhost(target, "run", "--example", "tutorial", "-p", "ZzRemovable")
    assert (result.returncode, result.stdout) == (2, "")
    assert "unknown pass 'ZzRemovable'" in result.stderr


def test_the_docs_example_plugin_builds_installs_and_runs(tmp_path):
    text = (ROOT / "docs" / "plugins.md").read_text()
    src = tmp_path / "passhost-double-negation"
    src.mkdir()
    for name, body in re.findall(r"^```\w+ file=(\S+)\n(.*?)^```", text, re.S | re.M):
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_text(body)
    target = tmp_path / "site"
    pip_install(target, src)
    pip_install(target, src / "rules")  # the plugin made of rules, from the same page
    assert [p["name"] for p in listing(target)["passes"] if p["name"] == "ExpandSquare"] == ["ExpandSquare"]
    result = run_passhost(target, "run", str(src / "rules" / "square.txt"), "-p", "ExpandSquare", "--no-meta-data")
    assert result.returncode == 0 and "multiply(%x, %x)" in result.stdout, result.stderr
    [entry] = [p for p in listing(target)["passes"] if p["name"] == "DoubleNegation"]
    assert (entry["distribution"], entry["version"], entry["opt_level"]) == ("passhost-double-negation", "0.1.0", 1)
    result = run_passhost(target, "run", str(src / "neg.txt"), "-p", "DoubleNegation", "--no-meta-data")
    assert result.returncode == 0, result.stderr
    assert "add(%x, %0)" in result.stdout and result.stdout.count("negative(") == 1
