"""mkdocs hook: the API reference reads `animus_flows` as it installs, blocks/ and hooks/ included.

setuptools maps the top-level folders blocks/ and hooks/ to `animus_flows.blocks` and
`animus_flows.hooks` (`package-dir` in pyproject.toml); griffe, which mkdocstrings uses to read
the sources without importing them, only follows a package's own folder. So each build copies
the three folders into one `animus_flows` package in a temporary folder and points the python
handler there.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from mkdocs.plugins import event_priority

ROOT = Path(__file__).resolve().parents[2]
MAPPED = {"blocks": "blocks", "hooks": "hooks"}  # subpackage -> folder, as in pyproject.toml
_staging: list[Path] = []


@event_priority(100)  # before mkdocstrings reads its handler options
def on_config(config: Any) -> Any:
    staging = Path(tempfile.mkdtemp(prefix="animus-docs-src-"))
    _staging.append(staging)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    package = staging / "animus_flows"
    shutil.copytree(ROOT / "animus_flows", package, ignore=ignore)
    for name, folder in MAPPED.items():
        shutil.copytree(ROOT / folder, package / name, ignore=ignore)
    python = config.plugins["mkdocstrings"].config.handlers.setdefault("python", {})
    python["paths"] = [str(staging)]
    return config


def on_shutdown() -> None:
    while _staging:
        shutil.rmtree(_staging.pop(), ignore_errors=True)
