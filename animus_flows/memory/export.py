"""The export document, its strict parser, and ZIP backups: pure functions plus one file write.

An export is one JSON document::

    {"format": "animus-memories", "version": 1, "exported_at": "...", "scope": {...},
     "count": N, "memories": [<Memory.to_json()>, ...]}

`parse_export` accepts that document or a bare list of records and validates every record
before anything is written, so a bad import changes nothing. A record's `id` is the store key it
was read from and is written back under exactly that key: a UUID for memories the layer created,
whatever key another tool chose otherwise (`animus memory put --key desk-limits`). A record
without `provenance` gets `import`; one with it keeps it, so a restored backup is faithful. A
record of a memory that expires carries `expires_at` (ISO 8601, UTC); one that never expires has
no such field.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tempfile
import zipfile
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO

from animus_flows import __version__
from animus_flows.errors import InvalidRequest
from animus_flows.memory.records import Memory, parse_record_time
from animus_flows.protocol import JSON, Scope, utcnow
from animus_flows.redaction import redact, refuse_secret_in_key
from animus_flows.stores.checks import check_key

EXPORT_FORMAT = "animus-memories"
EXPORT_VERSION = 1
BACKUP_EXPORT_NAME = "memories.json"
BACKUP_MANIFEST_NAME = "manifest.json"


#: The record field, beside `Memory`'s own, that says when a memory expires.
EXPIRES_AT = "expires_at"


class ImportCount(int):
    """The number of memories an import wrote; `skipped` counts the records it left out
    because their `expires_at` had passed (they would be gone at once)."""

    skipped: int

    def __new__(cls, imported: int, skipped: int = 0) -> ImportCount:
        count = super().__new__(cls, imported)
        count.skipped = skipped
        return count


def export_document(
    memories: Iterable[Memory],
    scope: Scope,
    *,
    exported_at: datetime | None = None,
    expiries: Mapping[str, datetime] | None = None,
) -> dict[str, JSON]:
    """The export of `memories` from `scope`, oldest first; `expiries`: when the memories that
    expire do, by id (the others' records have no `expires_at`)."""
    records = sorted(memories, key=lambda m: (m.created_at, m.version, m.id))
    expiries = expiries or {}
    return {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "exported_at": (exported_at or utcnow()).isoformat(),
        "scope": scope.to_json(),
        "count": len(records),
        "memories": [_record(memory, expiries.get(memory.id)) for memory in records],
    }


def _record(memory: Memory, expires_at: datetime | None) -> dict[str, JSON]:
    record = memory.to_json()
    if expires_at is not None:
        record[EXPIRES_AT] = expires_at.astimezone(UTC).isoformat()
    return record


def dumps(document: Mapping[str, JSON]) -> str:
    return json.dumps(document, indent=2, ensure_ascii=False, allow_nan=False)


def parse_export(text: str | bytes) -> list[Memory]:
    """Every memory in an export, validated; raises on the first problem, naming where it is.

    Raises:
        InvalidRequest: the text is not JSON, not an export, or a record is malformed.
    """
    return parse_export_with_expiries(text)[0]


def parse_export_with_expiries(text: str | bytes) -> tuple[list[Memory], dict[str, datetime]]:
    """What `parse_export` returns, and when the memories whose records carry `expires_at`
    expire, by id (aware: a time without a zone is read as UTC, like the record's others).

    Raises:
        InvalidRequest: as `parse_export`; also for an `expires_at` that is no ISO 8601 time.
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidRequest(
            f"import data is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno}); "
            "pass the output of export_memories or `animus memory export`"
        ) from None
    except UnicodeDecodeError:
        raise InvalidRequest("import data is not UTF-8 text; pass a JSON export") from None
    except RecursionError:  # no export nests this deep; json would crash on it
        raise InvalidRequest(
            "import data is not a memory export (JSON nested too deeply to read); "
            "pass the output of export_memories or `animus memory export`"
        ) from None
    if isinstance(data, dict):
        if data.get("format") != EXPORT_FORMAT:
            raise InvalidRequest(
                f"import data has format {data.get('format')!r}, not {EXPORT_FORMAT!r}; "
                "pass the output of export_memories or a JSON list of memory records"
            )
        if data.get("version") != EXPORT_VERSION:
            raise InvalidRequest(
                f"import data is export version {data.get('version')!r}; this animus-flows "
                f"reads version {EXPORT_VERSION}"
            )
        records = data.get("memories")
    else:
        records = data
    if not isinstance(records, list):
        raise InvalidRequest(
            "import data has no list of memories; pass an export document or a JSON list"
        )
    memories: list[Memory] = []
    expiries: dict[str, datetime] = {}
    seen: dict[str, int] = {}
    for index, record in enumerate(records):
        where = f"memories[{index}]"
        expires_at = None
        if isinstance(record, Mapping):
            record = {"provenance": "import", **record}
            try:
                expires_at = parse_record_time(record.pop(EXPIRES_AT, None), EXPIRES_AT)
            except InvalidRequest as exc:
                raise InvalidRequest(f"{where}: {exc}") from None
        memory = Memory.from_json(record, where=where)
        try:
            check_key(memory.id)  # what the store will be asked to take
            refuse_secret_in_key(memory.id)  # before anything is written, not at its put
            for name in ("parent_id", "superseded_by"):  # keys of other memories
                _refuse_secret_in_link(name, getattr(memory, name))
        except InvalidRequest as exc:
            raise InvalidRequest(f"{where}: {exc}") from None
        if memory.id in seen:
            raise InvalidRequest(
                f"{where}: id {memory.id} repeats memories[{seen[memory.id]}]; "
                "each memory appears once in an import"
            )
        seen[memory.id] = index
        memories.append(memory)
        if expires_at is not None:
            expiries[memory.id] = expires_at
    _refuse_version_cycles(memories)
    return memories, expiries


def _refuse_secret_in_link(name: str, key: str | None) -> None:
    """Refuse a link to another memory's key that holds a secret: no key holds one, and the
    link is kept as written (it is the layer's bookkeeping, which redaction leaves alone)."""
    found = None if key is None else redact(key)
    if found is not None and found.count:
        raise InvalidRequest(
            f"{name} {found.text!r} holds a secret ({', '.join(found.types)}); it names the "
            "key of another memory, and keys hold no secrets: fix the record"
        )


def _refuse_version_cycles(memories: list[Memory]) -> None:
    """Refuse records whose parent chain within the import loops (one that is its own parent,
    or c1 -> c2 -> c1): each would supersede the other, and recall would show none of them."""
    parents = {memory.id: memory.parent_id for memory in memories}
    index = {memory.id: n for n, memory in enumerate(memories)}
    done: set[str] = set()  # ids whose chain is known to end
    for memory in memories:
        chain: list[str] = []
        on_chain: set[str] = set()
        current: str | None = memory.id
        while current in parents and current not in done:
            if current in on_chain:
                loop = [*chain[chain.index(current) :], current]
                if len(loop) > 6:  # one line, however long the loop
                    loop = [*loop[:5], "...", current]
                raise InvalidRequest(
                    f"memories[{index[current]}]: the version chain of id {current} loops back "
                    f"to it ({' -> '.join(loop)}); a parent_id must name an older version"
                )
            chain.append(current)
            on_chain.add(current)
            current = parents[current]
        done.update(chain)


def manifest(export_text: str, document: Mapping[str, JSON]) -> dict[str, JSON]:
    """What a backup holds, so a restore can check it before trusting it."""
    return {
        "format": "animus-memories-backup",
        "version": EXPORT_VERSION,
        "created_at": utcnow().isoformat(),
        "animus_flows_version": __version__,
        "scope": document["scope"],
        "count": document["count"],
        "files": {
            BACKUP_EXPORT_NAME: {
                "sha256": hashlib.sha256(export_text.encode("utf-8")).hexdigest(),
                "bytes": len(export_text.encode("utf-8")),
            }
        },
    }


def write_atomically(path: str | os.PathLike[str], write: Callable[[BinaryIO], None]) -> Path:
    """Create or replace `path` with what `write` puts in a file object: a reader sees the old
    file or the complete new one, never a partial one.

    A symbolic link stays and its target is replaced. A path that is not a regular file (a
    named pipe, a device such as /dev/stdout) is written to directly: it cannot be replaced.

    Raises:
        InvalidRequest: `path` is a folder or cannot be written (the message names the
            system's reason).
    """
    target = Path(path)
    if target.is_dir():
        raise InvalidRequest(f"{target} is a folder; pass a file name")
    try:
        if target.exists() and not target.is_file():
            with open(target, "wb") as stream:
                write(stream)
            return target
        # a link's own directory entry stays; the file it names is replaced
        final = Path(os.path.realpath(target))
        final.parent.mkdir(parents=True, exist_ok=True)
        handle, partial = tempfile.mkstemp(prefix=f".{final.name}.", dir=final.parent)
        try:
            with os.fdopen(handle, "wb") as raw:
                write(raw)
            os.replace(partial, final)
        except BaseException:
            Path(partial).unlink(missing_ok=True)
            raise
    except OSError as exc:
        # only creating the folders meets an existing name: a file where a folder should be
        reason = "a file is in the way of its folder" if isinstance(exc, FileExistsError) else None
        raise InvalidRequest(
            f"cannot write {target} ({reason or exc.strerror or exc}); pass a writable file path"
        ) from None
    return target


def write_backup(
    path: str | os.PathLike[str], export_text: str, document: Mapping[str, JSON]
) -> Path:
    """Write a ZIP backup (the export and a manifest) to `path`, atomically."""

    # Built in memory (the export text is there already): zipfile seeks and reads positions
    # back, which a pipe or a device such as /dev/null cannot do.
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(BACKUP_EXPORT_NAME, export_text)
        zf.writestr(BACKUP_MANIFEST_NAME, dumps(manifest(export_text, document)))
    return write_atomically(path, lambda raw: raw.write(buffer.getbuffer()))


def read_backup(path: str | os.PathLike[str]) -> str:
    """The export text inside a backup, after checking it against the manifest."""
    try:
        with zipfile.ZipFile(path) as zf:
            export_text = zf.read(BACKUP_EXPORT_NAME).decode("utf-8")
            recorded = json.loads(zf.read(BACKUP_MANIFEST_NAME))
    except (OSError, KeyError, zipfile.BadZipFile, ValueError, RecursionError) as exc:
        raise InvalidRequest(f"{path} is not a readable memory backup ({exc})") from None
    expected = recorded.get("files", {}).get(BACKUP_EXPORT_NAME, {}).get("sha256")
    if hashlib.sha256(export_text.encode("utf-8")).hexdigest() != expected:
        raise InvalidRequest(f"{path}: {BACKUP_EXPORT_NAME} does not match its manifest checksum")
    return export_text
