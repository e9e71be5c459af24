"""MkDocs hook: let mkdocstrings find ``fdp.schemas`` under the name it is installed as.

The ``fdp`` namespace maps ``fdp.schemas`` to the folder ``schemas/`` (pyproject's package-dir), which a
static reader cannot follow through the editable install; a link tree ``fdp/schemas -> schemas`` in a
temporary folder on ``sys.path`` shows it where an import would find it (tests/test_lint.py does the same for mypy).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parents[1]
_TREE = tempfile.TemporaryDirectory(prefix="fdp-docs-")


def on_startup(**_: Any) -> None:
    """Lay out the link tree once per MkDocs process."""
    fdp = Path(_TREE.name) / "fdp"
    if not fdp.exists():
        fdp.mkdir()
        (fdp / "schemas").symlink_to(_ROOT / "schemas")
    if _TREE.name not in sys.path:
        sys.path.insert(0, _TREE.name)
