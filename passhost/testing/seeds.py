"""Reading the TVM seed pages (``tests/seeds/*.txt``: saved sphinx-gallery tutorials whose
printed output passhost reproduces literally), for tests.

The saved pages keep their text on long lines, so outputs are compared whitespace-
insensitively with :func:`collapse`::

    blocks = seed_code_blocks(ROOT / "tests" / "seeds" / "tvm-use-pass-infra-tutorial.txt")
    assert collapse(str(mod)) == collapse(blocks[0])
"""
from __future__ import annotations

import os
import re
from typing import Union

__all__ = ["collapse", "seed_code_blocks"]

_BLOCK = re.compile(r"\.\. code-block:: none (.*?)(?= \.\. GENERATED FROM| \.\. _sphx_glr_download)")


def collapse(text: str) -> str:
    """``text`` with every run of whitespace made one space, and none at the ends."""
    return " ".join(text.split())


def seed_code_blocks(path: Union[str, "os.PathLike[str]"]) -> list:
    """The printed outputs (``.. code-block:: none`` sections) of a saved tutorial page,
    in page order."""
    with open(path, encoding="utf-8") as f:
        return _BLOCK.findall(f.read())
