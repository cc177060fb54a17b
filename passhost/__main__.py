"""``python -m passhost`` runs the ``passhost`` command."""
from __future__ import annotations

import sys

from .cli import main

sys.exit(main())
