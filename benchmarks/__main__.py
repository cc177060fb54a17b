"""``python -m benchmarks``: run every benchmark (see :mod:`benchmarks.run`)."""
from __future__ import annotations

from benchmarks.run import main

raise SystemExit(main())
