"""Import hooks and runners named in the workflow file, at load time, with clear errors."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from animus_flows.errors import ConfigError


def import_callable(path: str, base_dir: Path, *, what: str) -> Callable[..., Any]:
    """`package.module:function`, or `path/to/file.py:function` relative to `base_dir`."""
    module_name, _, attribute = path.rpartition(":")
    if module_name.endswith(".py"):
        file = (base_dir / module_name).resolve()
        if not file.is_file():
            raise ConfigError(
                f"{what} {path!r}: no file {file}; fix the path (relative to the YAML file)"
            )
        unique = f"animus_user_{abs(hash(str(file)))}"
        module = sys.modules.get(unique)
        if module is None:
            spec = importlib.util.spec_from_file_location(unique, file)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            try:
                spec.loader.exec_module(module)
            except Exception as exc:
                raise ConfigError(
                    f"{what} {path!r}: importing {file} failed: {type(exc).__name__}: {exc}"
                ) from None
            sys.modules[unique] = module
    else:
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise ConfigError(
                f"{what} {path!r}: cannot import {module_name!r} ({exc}); "
                "install it or fix the path"
            ) from None
    target = getattr(module, attribute, None)
    if not callable(target):
        raise ConfigError(
            f"{what} {path!r}: {module_name!r} has no callable {attribute!r}; "
            "define it there or fix the name after ':'"
        )
    return target
