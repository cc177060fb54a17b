"""--disable/--require lists and names, the -O gating note, PASSHOST_DISABLE_PLUGINS and an
empty default pipeline, with the installed first-party passes (issue 15, items 2, 3, 5)."""
from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def in_tmp_dir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a crash reproducer would land here


def test_disable_and_require_take_comma_lists_and_refuse_unknown_names(capsys):
    from passhost.cli import main

    assert main(["run", "--example", "tutorial", "-O3", "--disable", "FoldConstant,FuseOps", "--no-meta-data"]) == 0
    out = capsys.readouterr().out
    assert "fn (" not in out and "multiply(" in out  # neither fused nor folded
    assert main(["run", "--example", "tutorial", "-O3", "--disable", "FoldConstnt"]) == 2
    assert "--disable FoldConstnt: unknown pass 'FoldConstnt'; did you mean 'FoldConstant'?" in capsys.readouterr().err
    assert main(["run", "--example", "tutorial", "--require", "Nope"]) == 2
    assert "--require Nope: unknown pass" in capsys.readouterr().err


def test_a_pass_named_with_p_and_gated_by_the_level_gets_a_note(capsys):
    from passhost.cli import main

    assert main(["run", "--example", "tutorial", "-p", "FoldConstant,EliminateCommonSubexpr", "--no-meta-data"]) == 0
    err = capsys.readouterr().err
    assert ("passhost: note: EliminateCommonSubexpr (opt_level 3) is skipped at -O2; run it with -O3 or "
            "--require EliminateCommonSubexpr") in err
    assert main(["run", "--example", "tutorial", "-O3", "-p", "FoldConstant,EliminateCommonSubexpr",
                 "--no-meta-data"]) == 0
    assert "note" not in capsys.readouterr().err


def test_unknown_names_in_passhost_disable_plugins_are_warned_about(monkeypatch):
    import warnings

    from passhost.registry import Registry

    monkeypatch.setenv("PASSHOST_DISABLE_PLUGINS", "fold-constan")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        Registry()
    assert any("did you mean 'fold-constant'" in str(w.message) for w in caught)


def test_an_empty_default_pipeline_is_warned_about(capsys):
    from passhost.cli import main
    from passhost.registry import Registry, use_registry

    with use_registry(Registry(load_entrypoints=False)):
        assert main(["run", "--example", "tutorial", "--no-meta-data"]) == 0
    assert "no passes are installed" in capsys.readouterr().err


def test_run_help_shows_examples_and_the_opt_level_range(capsys):
    from passhost.cli import main

    with pytest.raises(SystemExit):
        main(["run", "--help"])
    out = capsys.readouterr().out
    assert "examples:" in out and "passhost run model.onnx -O3 -o model.opt.onnx" in out
    assert "0 to 4" in out


@pytest.mark.parametrize("level", ["9", "-1", "x"])
def test_opt_level_out_of_range_is_a_usage_error(capsys, level):
    from passhost.cli import main

    assert main(["run", "--example", "tutorial", "-O", level]) == 2
    err = capsys.readouterr().err
    assert err.startswith("passhost: error: argument -O: ") and err.count("\n") == 1


def _complete(tmp_path, *words):
    """Run the generated bash completion function on ``words`` (the last one being completed)."""
    import shlex
    import shutil
    import subprocess
    import sys

    from passhost.cli.app import build_parser
    from passhost.cli.completion import bash_script

    bash = shutil.which("bash")
    if bash is None:  # pragma: no cover - every CI image has bash
        pytest.skip("bash is not installed")
    script = bash_script(build_parser()).replace(
        "passhost completion --names", f"{shlex.quote(sys.executable)} -m passhost completion --names")
    driver = tmp_path / "drive.sh"
    driver.write_text(script + "\nCOMP_WORDS=(" + " ".join(shlex.quote(w) for w in words) + ")\n"
                      "COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); COMPREPLY=(); _passhost; "
                      'printf "%s\\n" "${COMPREPLY[@]}"\n')
    out = subprocess.run([bash, str(driver)], capture_output=True, text=True, check=True, cwd=tmp_path).stdout
    return out.split()


def test_bash_completion_of_commands_options_and_installed_names(tmp_path):
    assert _complete(tmp_path, "passhost", "r") == ["run"]
    assert "--no-verify-each" in _complete(tmp_path, "passhost", "run", "--no-v")
    assert set(_complete(tmp_path, "passhost", "run", "-p", "FoldC")) == {"FoldConstant"}
    assert "FoldConstant,FuseOps" in _complete(tmp_path, "passhost", "run", "-p", "FoldConstant,Fuse")
    assert _complete(tmp_path, "passhost", "run", "--example", "res") == ["resnet18", "resnet50"]
    assert "FoldScaleAxis" in _complete(tmp_path, "passhost", "info", "Fold")


def test_completion_scripts_for_bash_and_zsh(capsys):
    from passhost.cli import main

    assert main(["completion", "bash"]) == 0
    bash = capsys.readouterr().out
    assert "complete -o filenames -F _passhost passhost" in bash
    assert main(["completion", "zsh"]) == 0
    assert capsys.readouterr().out.startswith("autoload -U +X bashcompinit && bashcompinit\n")
    assert main(["completion"]) == 2
