"""The `animus` command line: thin wrappers that parse flags, call the library and print.

Exit codes: 0 success, 1 runtime failure, 2 usage or configuration error. Errors are one line
on stderr (a traceback only with `--debug`); `--json` prints exactly one JSON document on stdout.
"""

from __future__ import annotations

import sys
from typing import Any

import typer

from animus_flows.cli import mcp, memory, workflow  # noqa: F401 - they register the commands
from animus_flows.cli.app import _print_error, app

__all__ = ["app", "main"]


def main() -> None:
    """Console-script entry point.

    Click reports a bad flag or command in four lines (usage, hint, blank line, error); here it
    is one line like every other error, naming the flag and where its help is.
    """
    from typer.exceptions import TyperException  # the base of typer's (vendored) click errors

    try:
        code = app(prog_name="animus", standalone_mode=False)
    except TyperException as exc:
        context = getattr(exc, "ctx", None)
        if context is not None and exc.format_message() == context.get_help():
            exc.show()  # a command group run bare: its help, as click shows it
        else:
            where = context.command_path if context is not None else "animus"
            message = exc.format_message().removesuffix(".")
            given = _given_value(getattr(exc, "param", None), sys.argv[1:])
            if given is not None:
                message += f" (got {given!r})"
            joint = " " if message.endswith("?") else "; "  # after "Did you mean 'x'?"
            _print_error(f"{message}{joint}see '{where} --help'")  # the value typed may be a key
        sys.exit(exc.exit_code)
    except typer.Abort:
        _print_error("aborted")
        sys.exit(1)
    sys.exit(code if isinstance(code, int) else 0)


def _given_value(param: Any, argv: list[str]) -> str | None:
    """What was typed for a rejected option (click's message leaves it out), if findable."""
    for flag in getattr(param, "opts", ()):
        for index, arg in enumerate(argv):
            if arg == flag and index + 1 < len(argv):
                return argv[index + 1]
            if arg.startswith(flag + "="):
                return arg[len(flag) + 1 :]
    return None


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
