"""The SQLite store's file: one writer on a thread of its own, one read-only reader inline.

Writes run on the store's thread, so a write waiting on another process's lock never blocks the
event loop and a caller's timeout can give up on it. Reads run inline on a read-only connection:
in WAL mode a read never waits for a writer (one that would is handed to the thread instead).
The file is checked before it is changed: only an empty database becomes a store, another
program's file is left untouched, and a store file deleted or replaced while open is never
written to (the data would silently go nowhere).
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from animus_flows.errors import StoreTimeout, StoreUnavailable

T = TypeVar("T")

CACHE_KIB = 65536  # page cache per connection; the default 2 MiB rereads hot index pages
MMAP_BYTES = 1 << 30  # read through the OS page cache without copying


@contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """`BEGIN IMMEDIATE` ... `COMMIT`, rolled back on any error: a write is whole or absent."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _file_at(path: str) -> tuple[int, int] | None:
    """(st_dev, st_ino) of the file now at `path`, or None when there is none."""
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_dev, found.st_ino


def _waits_on_lock(exc: sqlite3.OperationalError) -> bool:
    """Whether SQLite gave up because another connection holds a lock."""
    return "locked" in str(exc) or "busy" in str(exc)


def _size_caches(conn: sqlite3.Connection) -> None:
    conn.execute(f"PRAGMA cache_size = -{CACHE_KIB}")
    conn.execute(f"PRAGMA mmap_size = {MMAP_BYTES}")


class StoreFile:
    """The connections to one store file.

    `prepare(conn)` runs on the writer once it is open (create or migrate the schema) and
    `is_current(reader)` tells whether the file needs no preparing: then reads start without
    the writer's thread, and without waiting for another process's write.
    """

    def __init__(
        self,
        path: Path,
        busy_timeout_ms: int,
        prepare: Callable[[sqlite3.Connection], None],
        is_current: Callable[[sqlite3.Connection], bool],
    ) -> None:
        self.path = path
        self.busy_timeout_ms = busy_timeout_ms
        self._prepare = prepare
        self._is_current = is_current
        self._conn: sqlite3.Connection | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._executor_lock = threading.Lock()
        self._reader: sqlite3.Connection | None = None
        self._reader_lock = threading.Lock()
        # the writer's file, by absolute path as SQLite holds it, and its identity: `writing`
        self._opened: tuple[str, tuple[int, int] | None] = ("", None)
        self._current = False  # the file exists with the current schema, in WAL mode
        self._writer_wanted = False  # the file must be created or migrated first

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """Run `fn(writer, *args)` on the store's thread."""
        with self._executor_lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(1, thread_name_prefix="animus-sqlite")
        return await asyncio.get_running_loop().run_in_executor(
            self._executor, self._call, fn, args
        )

    async def read(self, fn: Callable[..., T], *args: Any) -> T:
        """Run the read-only `fn(reader, *args)` inline, on a connection that never waits.

        A scoped read takes about a millisecond: less than `run`'s two thread hand-offs cost on a
        busy machine. Should the reader meet a lock anyway (the file is not in WAL mode), or
        another thread be using it, the read goes through `run`, whose wait a caller's timeout
        can abandon.
        """
        if not self._current and not self._reader_finds_current():
            await self.run(lambda conn: None)  # the writer's thread prepares the file first
        if self._reader_lock.acquire(blocking=False):
            try:
                return fn(self._reader or self._open_reader(), *args)
            except sqlite3.OperationalError as exc:
                if not _waits_on_lock(exc):
                    raise self.unavailable(exc) from None
            except sqlite3.DatabaseError as exc:
                self._drop_reader()
                raise self.unavailable(exc) from None
            finally:
                self._reader_lock.release()
        return await self.run(fn, *args)

    def is_reader(self, conn: sqlite3.Connection) -> bool:
        return conn is self._reader

    @contextmanager
    def writing(self, conn: sqlite3.Connection) -> Iterator[None]:
        """`transaction` on the writer, refused when `path` no longer is the file it opened.

        An open connection keeps writing into a deleted file, or into the old file after another
        was moved over it, and every write looks fine: the data would go nowhere. One stat per
        write (a few µs of a put's ~0.7 ms); reads are not checked.
        """
        path, opened = self._opened
        with transaction(conn):
            if _file_at(path) != opened:
                raise StoreUnavailable(
                    f"SQLite store {self.path} was deleted or replaced while open, so nothing "
                    "was written; reopen the store (restart the run) to use the file at that path"
                )
            yield

    def unavailable(self, exc: Exception) -> StoreUnavailable:
        if not self.path.exists():
            return StoreUnavailable(
                f"SQLite store {self.path} was deleted while open; reopen the store (restart "
                "the run) to start a new file at that path"
            )
        return StoreUnavailable(
            f"SQLite store {self.path} failed: {exc}; check the file is an animus store "
            "(move a damaged file aside to start a new one)"
        )

    async def aclose(self) -> None:
        with self._reader_lock:
            self._drop_reader()
        if self._executor is not None:
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(self._executor, self._drop_connection)
            self._executor.shutdown(wait=True)
            self._executor = None

    # -- the reader ---------------------------------------------------------------------------

    def _reader_finds_current(self) -> bool:
        if self._writer_wanted or not self._reader_lock.acquire(blocking=False):
            return False
        try:
            if self.path.is_file():
                reader = self._reader or self._open_reader()
                wal = reader.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
                self._current = wal and self._is_current(reader)
        except sqlite3.Error:
            pass  # the writer's open waits out a lock, or reports what is wrong with the file
        finally:
            self._reader_lock.release()
        # reads started meanwhile (a gather of many) wait for the writer without checking again
        self._writer_wanted = not self._current
        return self._current

    def _open_reader(self) -> sqlite3.Connection:
        # mode=rw: a reader never creates the file (the writer does, with the schema); one
        # deleted while the store is open is then reported, not replaced by an empty file
        reader = sqlite3.connect(
            f"{self.path.absolute().as_uri()}?mode=rw",
            uri=True,
            timeout=0,
            isolation_level=None,
            check_same_thread=False,
        )
        try:
            reader.execute("PRAGMA query_only = ON")
            _size_caches(reader)
        except sqlite3.Error:
            reader.close()
            raise
        self._reader = reader
        return reader

    def _drop_reader(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None

    # -- the writer ---------------------------------------------------------------------------

    def _call(self, fn: Callable[..., T], args: tuple[Any, ...]) -> T:
        try:
            return fn(self._connection(), *args)
        except sqlite3.OperationalError as exc:
            if _waits_on_lock(exc):
                raise StoreTimeout(
                    f"SQLite store {self.path} stayed locked for {self.busy_timeout_ms} ms; "
                    "another process holds a long write, retry or raise busy_timeout_ms"
                ) from None
            raise self.unavailable(exc) from None
        except sqlite3.DatabaseError as exc:
            self._drop_connection()
            raise self.unavailable(exc) from None

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            self._conn = self._open()
        return self._conn

    def _drop_connection(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _open(self) -> sqlite3.Connection:
        if self.path.is_dir():
            raise StoreUnavailable(
                f"SQLite store path {self.path} is a folder; point `path` to a file inside it"
            )
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreUnavailable(
                f"cannot create the folder of SQLite store {self.path} ({exc.strerror}); "
                "choose a writable `path`"
            ) from None
        try:
            conn = sqlite3.connect(
                self.path,
                timeout=self.busy_timeout_ms / 1000,
                isolation_level=None,
                check_same_thread=False,
            )
        except sqlite3.Error as exc:
            raise StoreUnavailable(
                f"cannot open SQLite store {self.path} ({exc}); choose a writable `path`"
            ) from None
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_ms)}")
            self._refuse_foreign(conn)  # before WAL mode or tables change the file
            self._enable_wal(conn)
            conn.execute("PRAGMA synchronous = NORMAL")
            _size_caches(conn)
            self._prepare(conn)
        except Exception as exc:
            conn.close()
            if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
                raise
            if not isinstance(exc, sqlite3.DatabaseError):
                raise
            raise StoreUnavailable(
                f"{self.path} is not a usable animus SQLite store ({exc}); "
                "move it aside or point `path` to a new file"
            ) from None
        path = os.path.abspath(self.path)  # a later chdir does not move SQLite's file either
        self._opened = (path, _file_at(path))
        self._current = True
        return conn

    def _refuse_foreign(self, conn: sqlite3.Connection) -> None:
        """Refuse a file that is neither an animus store nor empty, leaving it as it was.

        An animus store carries `animus_meta` from its first version on; an empty database
        (a new or zero-length file) becomes one. Anything else belongs to another program.
        """
        tables = [
            name
            for (name,) in conn.execute(
                "SELECT name FROM sqlite_master WHERE type IN ('table', 'view')"
                " AND name NOT GLOB 'sqlite_*' ORDER BY name"
            )
        ]
        if "animus_meta" in tables:
            return
        user_version = conn.execute("PRAGMA user_version").fetchone()[0]
        application_id = conn.execute("PRAGMA application_id").fetchone()[0]
        if not tables and not user_version and not application_id:
            return
        if tables:
            shown = ", ".join(tables[:5]) + (", ..." if len(tables) > 5 else "")
            found = f"it holds tables of another program: {shown}"
        else:
            found = f"user_version {user_version}, application_id {application_id}"
        raise StoreUnavailable(
            f"{self.path} is not an animus SQLite store ({found}); left untouched: point "
            "`path` to a new file, or move that file aside"
        )

    def _enable_wal(self, conn: sqlite3.Connection) -> None:
        # Switching a new file to WAL needs a moment alone with it; when several processes
        # create the store at once, the busy handler does not cover this, so retry here.
        deadline = time.monotonic() + self.busy_timeout_ms / 1000
        while True:
            try:
                conn.execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.01)
