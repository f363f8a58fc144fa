"""Import hooks and runners named in the workflow file, at load time, with clear errors.

An import path that names nothing gets a did-you-mean: the close names among the module's
callables, the package's modules, or the folder's files.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import pkgutil
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from animus_flows.errors import ConfigError


def _suggest(wrong: str, known: Iterable[str], fallback: str) -> str:
    close = difflib.get_close_matches(wrong, sorted(set(known)), n=1)
    return f"did you mean {close[0]!r}?" if close else fallback


def _module_names(module_name: str) -> list[str]:
    """Importable module names beside `module_name` (in its package, or top-level)."""
    parent, _, _ = module_name.rpartition(".")
    if not parent:
        return [module.name for module in pkgutil.iter_modules()]
    try:
        package = importlib.import_module(parent)
    except ImportError:
        return []
    path = getattr(package, "__path__", None)
    return [f"{parent}.{module.name}" for module in pkgutil.iter_modules(path)] if path else []


def import_callable(path: str, base_dir: Path, *, what: str) -> Callable[..., Any]:
    """`package.module:function`, or `path/to/file.py:function` relative to `base_dir`."""
    module_name, _, attribute = path.rpartition(":")
    if module_name.endswith(".py"):
        file = (base_dir / module_name).resolve()
        if not file.is_file():
            files = [str(p.relative_to(base_dir)) for p in base_dir.glob("**/*.py")]
            hint = _suggest(module_name, files, "fix the path (relative to the YAML file)")
            raise ConfigError(f"{what} {path!r}: no file {file}; {hint}")
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
            missing = getattr(exc, "name", None)
            hint = "install it or fix the path"
            if missing and module_name.startswith(missing):  # the named module, not a dependency
                hint = _suggest(module_name, _module_names(module_name), hint)
            raise ConfigError(
                f"{what} {path!r}: cannot import {module_name!r} ({exc}); {hint}"
            ) from None
    target = getattr(module, attribute, None)
    if not callable(target):
        callables = [
            name for name, value in vars(module).items()
            if callable(value) and not name.startswith("_")
        ]  # fmt: skip
        hint = _suggest(attribute, callables, "define it there or fix the name after ':'")
        raise ConfigError(f"{what} {path!r}: {module_name!r} has no callable {attribute!r}; {hint}")
    return target
