#!/usr/bin/env bash
# Install the host and every local plugin, editable, in ONE pip call, plus the test tools.
#
# One call matters: `passhost` is not on PyPI, so a plugin installed on its own could not
# resolve its `passhost` dependency; in one call pip resolves it to this checkout.
# Run it inside the environment to install into (a venv, a tox env):
#     python3 -m venv .venv && . .venv/bin/activate && bash scripts/dev-install.sh
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python}
args=(-e ".[test]")
for dir in plugins/*/; do
    if [ -f "${dir}pyproject.toml" ]; then
        args+=(-e "$dir")
    fi
done
"$python" -m pip install -q --disable-pip-version-check "${args[@]}"
