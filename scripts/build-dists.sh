#!/usr/bin/env bash
# Build a wheel and an sdist of the host, of every plugin (plugins/*/) and of the
# passhost-standard meta-distribution (dists/*/) into dist/ (or the directory given).
#
# Then, in any environment with Python and pip:
#     pip install --find-links dist passhost-standard     # the host and every first-party plugin
#     pip install --find-links dist passhost passhost-fold-constant   # or just some of them
# and a third-party pack that requires "passhost>=0.1,<0.2" resolves against dist/ too.
#
# It calls setuptools' PEP 517 backend directly (no build isolation, so nothing is
# downloaded): run it where setuptools>=64 and wheel are installed (the test extra has them).
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python}
out=${1:-dist}
mkdir -p "$out"
out=$(cd "$out" && pwd)
if ! "$python" -c 'import setuptools.build_meta, wheel' 2>/dev/null; then
    echo "build-dists: needs setuptools>=64 and wheel: $python -m pip install setuptools wheel" >&2
    exit 2
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
count=0
for dir in . plugins/*/ dists/*/; do
    [ -f "$dir/pyproject.toml" ] || continue
    rm -rf "$dir/build"  # setuptools reuses build/lib: a module deleted since the last build would ship
    # one process per project: setuptools keeps state between builds
    if ! (cd "$dir" && "$python" - "$out" > "$log" 2>&1 <<'PY'
import sys
from setuptools import build_meta
out = sys.argv[1]  # read once: the backend rewrites sys.argv while it builds
print(build_meta.build_sdist(out))
print(build_meta.build_wheel(out))
PY
    ); then
        cat "$log" >&2
        echo "build-dists: building $dir failed (its log is above)" >&2
        exit 1
    fi
    count=$((count + 1))
done
echo "built $count projects: $(ls "$out"/*.whl | wc -l) wheels and $(ls "$out"/*.tar.gz | wc -l) sdists in $out"
