"""What a SQLite store file must be before it is read: of this schema, indexed with this
store's language and (with an embedder) this model. A file of schema 4 gets the tables added
since (the ledger); an older one is indexed again."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

from animus_flows.errors import ConfigError, StoreUnavailable
from animus_flows.redaction import get_logger
from animus_flows.stores.semantic import model_mismatch
from animus_flows.stores.sqlite.connection import transaction
from animus_flows.stores.sqlite.index import Indexer
from animus_flows.stores.sqlite.schema import (
    INDEXED_SINCE,
    SCHEMA_VERSION,
    create,
    meta,
    schema_version,
    set_meta,
    upgrade,
)

log = get_logger("animus_flows.stores.sqlite")

#: An older file is indexed again as it is opened when it holds at most this many items (a
#: few seconds); a larger one waits for `animus memory reindex`.
AUTO_REINDEX_ITEMS = 100_000


@dataclass
class Indexing:
    """The checks and upgrades of one store's file (see the module). `model` is the
    embedder's `model/dimension` once the store has asked it (None: no embedder)."""

    path: Path
    language: str
    indexer: Indexer
    model: str | None = None

    def is_current(self, reader: sqlite3.Connection) -> bool:
        """Whether the file needs nothing: then reads start without the writer."""
        model = self.model
        return (
            schema_version(reader) == SCHEMA_VERSION
            and meta(reader, "language") == self.language
            and (model is None or meta(reader, "embedder") == model)
        )

    def prepare(self, conn: sqlite3.Connection, *, reindex: bool) -> None:
        """Create the schema of a new file, upgrade an older one, and check it was indexed with
        this store's analyzer and model; runs on the writer as it opens."""
        path, language = self.path, self.language
        version = schema_version(conn)
        if version > SCHEMA_VERSION:
            raise StoreUnavailable(
                f"SQLite store {path} has schema version {version}, newer than this "
                f"animus-flows ({SCHEMA_VERSION}); upgrade animus-flows"
            )
        if version == 0:
            with transaction(conn):
                create(conn)
                set_meta(conn, "schema_version", str(SCHEMA_VERSION))
                set_meta(conn, "language", language)
            self.check_model(conn, reindex=reindex)
            return
        if INDEXED_SINCE <= version < SCHEMA_VERSION:
            with transaction(conn):
                create(conn)  # the tables a later schema added; the index stays as it is
                set_meta(conn, "schema_version", str(SCHEMA_VERSION))
            version = SCHEMA_VERSION
        recorded = meta(conn, "language")
        if version == SCHEMA_VERSION and recorded == language and not reindex:
            self.check_model(conn, reindex=reindex)
            return
        items = conn.execute("SELECT count(*) FROM items").fetchone()[0]
        if version == SCHEMA_VERSION and not reindex:
            raise ConfigError(
                f"SQLite store {path} is indexed for language {recorded!r}, not "
                f"{language!r}; run `animus memory reindex` to index its {items} items "
                f"for {language!r}, or set language: {recorded}"
            )
        if not reindex and items > AUTO_REINDEX_ITEMS:
            raise StoreUnavailable(
                f"SQLite store {path} holds {items} items indexed by an older animus-flows "
                "(no stemming, no stop words); run `animus memory reindex` once to index them "
                "again (about a minute per million items)"
            )
        with transaction(conn):
            if version < SCHEMA_VERSION:
                upgrade(conn)
            done = self.indexer.reindex(conn)
            set_meta(conn, "language", language)
            set_meta(conn, "schema_version", str(SCHEMA_VERSION))
        self.check_model(conn, reindex=reindex)
        log.warning(
            "SQLite store %s: %d items indexed again (schema %d, language %s)",
            path,
            done,
            SCHEMA_VERSION,
            language,
        )

    def check_model(self, conn: sqlite3.Connection, *, reindex: bool) -> None:
        """Record the embedder's model in a file that has none (queueing its items for
        vectors), and refuse one whose vectors another model made."""
        model = self.model
        if model is None:
            return
        recorded = meta(conn, "embedder")
        if recorded == model:
            return
        if recorded is not None and not reindex:
            raise model_mismatch(f"SQLite store {self.path}", recorded, model)
        with transaction(conn):
            conn.execute("DELETE FROM item_vectors")
            conn.execute("INSERT OR IGNORE INTO vector_pending SELECT id FROM items")
            conn.execute("UPDATE scopes SET vectors = -1")  # no vectors a process kept fit
            set_meta(conn, "embedder", model)
