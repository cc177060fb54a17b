"""Throwaway plugin distributions for end-to-end tests.

A test writes a one-module distribution with :func:`make_dist`, installs it into a
temporary directory with :func:`pip_install` (``pip install --target``; nothing touches
the running environment) and runs the ``passhost`` command in a subprocess that has that
directory on ``PYTHONPATH`` with :func:`run_passhost`, so plugin discovery goes through
real entry points::

    src = make_dist(tmp_path, "passhost-zz-demo", "zz-demo", PLUGIN_SOURCE)
    pip_install(tmp_path / "site", src)
    result = run_passhost(tmp_path / "site", "list", "--json")
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Optional, Union

__all__ = ["make_dist", "pip_install", "run_passhost"]

PathLike = Union[str, "os.PathLike[str]"]

_PYPROJECT = '''
[build-system]
requires = ["setuptools>=64"]
build-backend = "setuptools.build_meta"

[project]
name = "{dist}"
version = "{version}"
dependencies = ["passhost"]

[project.entry-points.passhost]
{ep} = "{module}"

[tool.setuptools]
py-modules = ["{module}"]
'''


def make_dist(where: PathLike, dist: str, ep: str, source: str, *, version: str = "0.4.2") -> Path:
    """Write the source tree of a one-module plugin distribution.

    :param where: an existing directory; the tree goes to ``where/dist``
    :param dist: the distribution name, e.g. ``passhost-zz-demo``; the module is its
        snake-case form (``passhost_zz_demo``)
    :param ep: the entry-point name in group ``passhost``
    :param source: the module's text (dedented)
    :param version: the distribution version
    :returns: the distribution's directory, for :func:`pip_install`
    """
    module = dist.replace("-", "_")
    d = Path(where) / dist
    d.mkdir()
    (d / "pyproject.toml").write_text(_PYPROJECT.format(dist=dist, version=version, ep=ep, module=module))
    (d / f"{module}.py").write_text(textwrap.dedent(source))
    return d


def pip_install(target: PathLike, *dists: PathLike) -> Path:
    """``pip install --target TARGET`` the distribution directories (no dependencies, no
    build isolation, so it works offline).

    :returns: ``target``, for :func:`run_passhost`
    :raises AssertionError: pip failed (the message is pip's error output)
    """
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps",
           "--no-build-isolation", "--target", str(target), *map(str, dists)]
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        raise AssertionError(f"pip install into {str(target)!r} failed:\n{result.stderr}")
    return Path(target)


def run_passhost(site: PathLike, *args: str, cwd: Optional[PathLike] = None,
                 **env: str) -> subprocess.CompletedProcess:
    """Run ``python -m passhost ARGS`` with ``site`` on ``PYTHONPATH`` and capture its output.

    ``PASSHOST_*`` variables of this process are not passed on (so the caller's settings
    cannot change the command's plugin set); keyword arguments add environment variables
    (``PASSHOST_DISABLE_PLUGIN_AUTOLOAD="1"``).

    :param cwd: the working directory (default: ``site``)
    """
    environ = {k: v for k, v in os.environ.items() if not k.startswith("PASSHOST_")}
    environ["PYTHONPATH"] = str(site)
    environ.update(env)
    return subprocess.run([sys.executable, "-m", "passhost", *args], capture_output=True, text=True,
                          env=environ, cwd=site if cwd is None else cwd)
