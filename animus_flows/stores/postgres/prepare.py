"""What a PostgreSQL store's schema must be before it is read: migrated to this version, indexed
with this store's text search configuration and (with an embedder) this model.

A process checks once, on its first call, with one read; only a schema that needs something
(new, older, or not yet recording the model) is changed, in one transaction holding the
migration lock, so processes that start together wait for the first rather than race it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from animus_flows.errors import ConfigError, StoreUnavailable
from animus_flows.redaction import get_logger
from animus_flows.stores.postgres.schema import (
    MIGRATION_LOCK,
    MIGRATIONS,
    SCHEMA_VERSION,
    quoted,
)
from animus_flows.stores.semantic import model_mismatch

log = get_logger("animus_flows.stores.postgres")


@dataclass
class SchemaState:
    """What a schema records: its version (0: none yet), language and embedder."""

    version: int = 0
    language: str | None = None
    embedder: str | None = None


async def read_state(conn: Any, schema: str) -> SchemaState:
    """The schema's version and what it was indexed with, in one read."""
    cursor = await conn.execute(
        "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = %s AND c.relname = 'schema_migrations'",
        (schema,),
    )
    (exists,) = await cursor.fetchone()
    if not exists:
        return SchemaState()
    s = quoted(schema)
    cursor = await conn.execute(
        f"SELECT (SELECT max(version) FROM {s}.schema_migrations),"
        f" (SELECT value FROM {s}.meta WHERE name = 'language'),"
        f" (SELECT value FROM {s}.meta WHERE name = 'embedder')"
    )
    version, language, embedder = await cursor.fetchone()
    return SchemaState(version or 0, language, embedder)


async def check_language(conn: Any, language: str, where: str) -> None:
    """Refuse a text search configuration the server does not have, listing those it has."""
    cursor = await conn.execute(
        "SELECT count(*) FROM pg_ts_config c JOIN pg_namespace n ON n.oid = c.cfgnamespace"
        " WHERE c.cfgname = split_part(%s, '.', -1)"
        " AND (n.nspname = split_part(%s, '.', -2) OR (strpos(%s, '.') = 0"
        " AND pg_ts_config_is_visible(c.oid)))",
        (language, language, language),
    )
    (found,) = await cursor.fetchone()
    if found:
        return
    cursor = await conn.execute(
        "SELECT cfgname FROM pg_ts_config WHERE pg_ts_config_is_visible(oid) ORDER BY cfgname"
    )
    known = ", ".join(name for (name,) in await cursor.fetchall())
    raise ConfigError(
        f"{where}: PostgreSQL has no text search configuration {language[:80]!r}; set language "
        f"to one of {known} (or create that configuration in the database)"
    )


async def _refuse_foreign(conn: Any, schema: str, where: str) -> None:
    """Refuse a schema that holds another program's tables (it has no migration table)."""
    cursor = await conn.execute(
        "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = %s ORDER BY c.relname LIMIT 6",
        (schema,),
    )
    names = [name for (name,) in await cursor.fetchall()]
    if names:
        shown = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")
        raise StoreUnavailable(
            f"{where}: schema {schema!r} holds tables of another program ({shown}); left "
            "untouched: choose another schema for the store"
        )


async def migrate(conn: Any, schema: str, where: str) -> int:
    """Bring `schema` to `SCHEMA_VERSION` in the caller's transaction, which holds the
    migration lock; returns the version it had."""
    s = quoted(schema)
    state = await read_state(conn, schema)
    if state.version > SCHEMA_VERSION:
        raise StoreUnavailable(
            f"{where} has schema version {state.version}, newer than this animus-flows "
            f"({SCHEMA_VERSION}); upgrade animus-flows"
        )
    if state.version == 0:
        await _refuse_foreign(conn, schema, where)
        await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {s}")
        await conn.execute(
            f"CREATE TABLE {s}.schema_migrations (version integer PRIMARY KEY,"
            " description text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
        )
    for migration in MIGRATIONS[state.version :]:
        for statement in migration.statements(s):
            await conn.execute(statement)
        await conn.execute(
            f"INSERT INTO {s}.schema_migrations (version, description) VALUES (%s, %s)",
            (migration.version, migration.description),
        )
    if state.version < SCHEMA_VERSION:
        log.info("%s: schema migrated from version %d to %d", where, state.version, SCHEMA_VERSION)
    return state.version


async def set_meta(conn: Any, schema: str, name: str, value: str) -> None:
    await conn.execute(
        f"INSERT INTO {quoted(schema)}.meta (name, value) VALUES (%s, %s)"
        " ON CONFLICT (name) DO UPDATE SET value = excluded.value",
        (name, value),
    )


@dataclass
class Preparation:
    """The checks of one store's schema (see the module)."""

    schema: str
    language: str
    where: str
    model: str | None = None

    def is_current(self, state: SchemaState) -> bool:
        return (
            state.version == SCHEMA_VERSION
            and state.language == self.language
            and (self.model is None or state.embedder == self.model)
        )

    async def prepare(self, conn: Any, *, reindex: bool = False) -> None:
        """Migrate, record the language and model of a new schema, and refuse a schema indexed
        another way (unless `reindex`, which indexes it again next)."""
        if not reindex and self.is_current(await read_state(conn, self.schema)):
            return
        await check_language(conn, self.language, self.where)
        # The lock is taken before the transaction starts, so that the transaction sees the
        # catalog as the process that held the lock left it (a transaction reads the catalog's
        # changes as it starts, not when a wait for an advisory lock ends).
        await conn.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK,))
        try:
            await self._migrate(conn, reindex=reindex)
        finally:
            await conn.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK,))

    async def _migrate(self, conn: Any, *, reindex: bool) -> None:
        async with conn.transaction():
            await migrate(conn, self.schema, self.where)
            state = await read_state(conn, self.schema)
            if state.language is None:
                await set_meta(conn, self.schema, "language", self.language)
            elif state.language != self.language and not reindex:
                items = await self._items(conn)
                raise ConfigError(
                    f"{self.where} is indexed for language {state.language!r}, not "
                    f"{self.language!r}; run `animus memory reindex` to index its {items} "
                    f"items for {self.language!r}, or set language: {state.language}"
                )
            if self.model is not None and state.embedder != self.model:
                if state.embedder is not None and not reindex:
                    raise model_mismatch(self.where, state.embedder, self.model)
                if state.embedder is None:
                    await set_meta(conn, self.schema, "embedder", self.model)
                    unembedded = await self._items(conn)
                    if unembedded:
                        log.warning(
                            "%s: %d items were written without an embedder and have no vectors; "
                            "run `animus memory reindex` to embed them",
                            self.where,
                            unembedded,
                        )

    async def _items(self, conn: Any) -> int:
        cursor = await conn.execute(f"SELECT count(*) FROM {quoted(self.schema)}.items")
        (count,) = await cursor.fetchone()
        return int(count)
