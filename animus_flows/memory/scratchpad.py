"""The per-agent scratchpad (seed 000, concept 1): a small, hard-limited text file per scope.

Files live under the runtime root (`.animus/scratchpad/<project>/<scope>.md` by default).
Writes are atomic (a temporary file renamed over the old one) and serialized across processes
with an exclusive lock, and a write past `max_context_chars` is refused without changing
anything.
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import hashlib
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from animus_flows.errors import AnimusError, ConfigError, InvalidRequest
from animus_flows.protocol import check_id

DEFAULT_MAX_CHARS = 6000


class ScratchpadFull(AnimusError):
    """A write would take the scratchpad past its character limit; nothing was changed."""

    def __init__(self, scope: str, chars_requested: int, chars_current: int, chars_limit: int):
        self.scope = scope
        self.chars_requested = chars_requested
        self.chars_current = chars_current
        self.chars_limit = chars_limit
        super().__init__(
            f"scratchpad {scope!r} would hold {chars_requested} characters, over its limit of "
            f"{chars_limit} (currently {chars_current}); nothing was changed: shorten the text, "
            "condense the notes with a full write, or clear old ones"
        )


@dataclass(frozen=True)
class ScratchpadState:
    """The scratchpad's text and its character budget, the way Letta shows a memory block."""

    text: str
    chars_current: int
    chars_limit: int

    def to_json(self) -> dict[str, int | str]:
        return {
            "text": self.text,
            "chars_current": self.chars_current,
            "chars_limit": self.chars_limit,
        }


# File names are at most 255 bytes on common filesystems. The longest one a scope has is its
# temporary file, ".<segment>.md.tmp-<32 hex digits>": 41 bytes besides the segment.
_MAX_PROJECT_SEGMENT = 255
_MAX_SCOPE_SEGMENT = 255 - 41
_HASH_CHARS = 32  # hex digits of SHA-256 that tell long ids apart


def scratchpad_path(root: Path, project_id: str, scope: str) -> Path:
    """The file of one scope; ids are percent-encoded so any id is one safe path segment.

    An id whose encoding is too long for a file name (a long one, or one in a script every
    character of which takes 9 bytes encoded) is named by a readable start of its encoding,
    `+` and a hash of the whole id: still one file per id, and no other id's plain encoding
    (which never holds a `+`) can take its name.
    """
    project = _segment(project_id, _MAX_PROJECT_SEGMENT)
    return root / "scratchpad" / project / f"{_segment(scope, _MAX_SCOPE_SEGMENT)}.md"


def _segment(ident: str, limit: int) -> str:
    # quote() leaves "." and ".." as they are: as folder names they would leave the tree
    encoded = quote(ident, safe="")
    if encoded in (".", ".."):
        return encoded.replace(".", "%2E")
    if len(encoded) <= limit:  # ASCII: characters are bytes
        return encoded
    digest = hashlib.sha256(ident.encode()).hexdigest()[:_HASH_CHARS]
    start = encoded[: limit - 1 - _HASH_CHARS]
    cut = start.rfind("%", len(start) - 2)  # never end in half an escape
    start = start if cut == -1 else start[:cut]
    return f"{start}+{digest}"


class Scratchpad:
    """One agent scope's scratchpad.

    Args:
        root: the runtime folder (`.animus` next to the workflow file).
        project_id: the project: 1 to 256 characters, no NUL, valid Unicode, as in a `Scope`.
        scope: the scratchpad's scope, usually the agent id; an id like `project_id`.
        max_chars: the most characters the text may hold, an integer >= 1.

    Raises:
        InvalidScope: an id is empty, too long, not a string, or holds a NUL or a lone
            surrogate.
        ConfigError: `max_chars` is not an integer >= 1.

    Example:
        ```python
        from pathlib import Path

        from animus_flows.memory.scratchpad import Scratchpad

        pad = Scratchpad(Path(".animus"), "trade-desk", "trade-analyst", max_chars=6000)
        pad.append("EUR/USD: watch 1.10")
        print(pad.read().text)
        ```
    """

    def __init__(
        self, root: Path, project_id: str, scope: str, max_chars: int = DEFAULT_MAX_CHARS
    ) -> None:
        check_id("scratchpad project_id", project_id, required=True)
        check_id("scratchpad scope", scope, required=True)
        if isinstance(max_chars, bool) or not isinstance(max_chars, int) or max_chars < 1:
            raise ConfigError(f"max_chars {max_chars!r} must be an integer >= 1")
        self.path = scratchpad_path(root, project_id, scope)
        self.scope = scope
        self.max_chars = max_chars

    def read(self) -> ScratchpadState:
        """The current text; never a partial write, since writes replace the file whole."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            text = ""
        return ScratchpadState(text, len(text), self.max_chars)

    def write(self, content: str) -> ScratchpadState:
        """Replace the whole text."""
        _check_text(content)
        with self._locked():
            return self._replace(content)

    def append(self, content: str) -> ScratchpadState:
        """Add to the end, on a new line when the text does not end with one."""
        _check_text(content)
        with self._locked():
            current = self.read().text
            if not content:
                return ScratchpadState(current, len(current), self.max_chars)
            joiner = "" if not current or current.endswith("\n") else "\n"
            return self._replace(current + joiner + content)

    def clear(self) -> ScratchpadState:
        with self._locked():
            return self._replace("")

    def _replace(self, text: str) -> ScratchpadState:
        """Write `text` whole, under the lock: a temporary file renamed over the old one."""
        if len(text) > self.max_chars:
            raise ScratchpadFull(self.scope, len(text), self.read().chars_current, self.max_chars)
        self._remove_stale_temps()
        temp = self.path.with_name(f"{self._temp_prefix}{uuid.uuid4().hex}")
        try:
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temp, self.path)
        except BaseException:
            temp.unlink(missing_ok=True)
            raise
        _fsync_folder(self.path.parent)  # make the rename itself survive a power loss
        return ScratchpadState(text, len(text), self.max_chars)

    @property
    def _temp_prefix(self) -> str:
        return f".{self.path.name}.tmp-"

    def _remove_stale_temps(self) -> None:
        """Drop temporary files a killed writer of this scope left behind (we hold the lock)."""
        prefix = self._temp_prefix
        for stale in self.path.parent.glob(glob.escape(prefix) + "*"):
            rest = stale.name[len(prefix) :]
            if len(rest) == 32 and all(c in "0123456789abcdef" for c in rest):
                stale.unlink(missing_ok=True)

    @contextmanager
    def _locked(self) -> Iterator[None]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_suffix(".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)


def _check_text(content: object) -> None:
    if not isinstance(content, str):
        raise InvalidRequest(
            f"scratchpad text {content!r} is a {type(content).__name__}; pass a string "
            "(clear() empties the scratchpad)"
        )


def _fsync_folder(folder: Path) -> None:
    with contextlib.suppress(OSError):  # some filesystems cannot open or sync a folder
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
