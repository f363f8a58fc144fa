"""The per-agent scratchpad (seed 000, concept 1): a small, hard-limited text file per scope.

Files live under the runtime root (`.animus/scratchpad/<project>/<scope>.md` by default).
Writes are atomic (a temporary file renamed over the old one) and serialized across processes
with an exclusive lock, and a write past `max_context_chars` is refused without changing
anything.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from animus_flows.errors import AnimusError

DEFAULT_MAX_CHARS = 6000


class ScratchpadFull(AnimusError):
    """A write would take the scratchpad past its character limit; nothing was changed."""


@dataclass(frozen=True)
class ScratchpadState:
    text: str
    chars_current: int
    chars_limit: int

    def to_json(self) -> dict[str, int | str]:
        return {
            "text": self.text,
            "chars_current": self.chars_current,
            "chars_limit": self.chars_limit,
        }


def scratchpad_path(root: Path, project_id: str, scope: str) -> Path:
    """The file of one scope; ids are percent-encoded so any id is one safe path segment."""
    return root / "scratchpad" / quote(project_id, safe="") / f"{quote(scope, safe='')}.md"


class Scratchpad:
    """One agent scope's scratchpad.

    Example:
        ```python
        pad = Scratchpad(Path(".animus"), "trade-desk", "trade-analyst", max_chars=6000)
        pad.append("EUR/USD: watch 1.10")
        print(pad.read().text)
        ```
    """

    def __init__(
        self, root: Path, project_id: str, scope: str, max_chars: int = DEFAULT_MAX_CHARS
    ) -> None:
        self.path = scratchpad_path(root, project_id, scope)
        self.scope = scope
        self.max_chars = max_chars

    def read(self) -> ScratchpadState:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            text = ""
        return ScratchpadState(text, len(text), self.max_chars)

    def write(self, content: str) -> ScratchpadState:
        """Replace the whole text."""
        with self._locked():
            return self._replace(content)

    def append(self, content: str) -> ScratchpadState:
        """Add to the end, on a new line when the text does not end with one."""
        with self._locked():
            current = self.read().text
            joiner = "" if not current or current.endswith("\n") else "\n"
            return self._replace(current + joiner + content)

    def clear(self) -> ScratchpadState:
        with self._locked():
            return self._replace("")

    def _replace(self, text: str) -> ScratchpadState:
        if len(text) > self.max_chars:
            current = self.read().chars_current
            raise ScratchpadFull(
                f"scratchpad {self.scope!r} would hold {len(text)} characters, over its limit of "
                f"{self.max_chars} (currently {current}); shorten the text or clear old notes"
            )
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, temp = tempfile.mkstemp(dir=self.path.parent, prefix=".tmp-", suffix=".md")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temp, self.path)
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise
        return ScratchpadState(text, len(text), self.max_chars)

    @contextmanager
    def _locked(self) -> Iterator[None]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_suffix(".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)
