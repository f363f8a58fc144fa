"""The PostgreSQL store's tables, and the migrations that create and upgrade them.

Everything lives in one PostgreSQL schema (`animus` by default), so a database can hold other
programs' tables, or several stores side by side. `schema_migrations` records each migration
applied; `migrate` applies the missing ones in one transaction, under an advisory lock, so
processes that connect at once wait for the first instead of racing it. A new migration is a
new entry at the end of `MIGRATIONS` (a ledger table, say); an applied one never changes.

The tables (version 1):

- `scopes`: one row per scope, ids as columns (`''` for an absent agent or task id: real ids
  are never empty), so a scope is matched by equality and no character of an id can reach
  another scope. It keeps the scope's statistics (`items`, `terms`: their summed lengths) and
  `version`, which every write bumps from one sequence: a process keeping the scope's vectors
  in memory knows when to read them again. Writers lock their scopes' rows first, in one order
  (`writes.lock_scopes`), so writes to one scope take turns and never deadlock.
- `items`: key, value and metadata (canonical JSON text: `get` returns what was written), the
  times, and `tsv`, the text's `tsvector` under the store's text search configuration, with
  `length`, its number of distinct lexemes. `postings` holds the same lexemes prefixed with
  the scope's id (`17xexplor`: digits, then `x`, so no pair of scope and lexeme spells
  another's); its GIN index finds a scope's items holding a lexeme by reading that scope's
  postings only, however large the other scopes are (a GIN index on `tsv` would read every
  scope's).
- `term_df`: each lexeme's document frequency per scope, so a word's rarity is measured in the
  scope searched (BM25's idf). Statement triggers keep it and the scope counters in step with
  every insert, update and delete of items, whatever statement made them.
- `item_vectors`: with an embedder, each item's vector (float32, little-endian `bytea`).
- `meta`: what the store was indexed with (`language`, and `embedder`: model/dimension).

Version 2 adds `ledger`: every change of every item (`ledger.py`), by scope id, key and the
key's version. A scope's row is kept when the scope is deleted, so its id names its history.
Version 3 adds `embedding_queue`: with an embedder, the items written one at a time wait there
for their vectors, newest first, each claimed by one process as it embeds it (`claimed_until`,
`claimed_by`: see `embedding.py`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from animus_flows.errors import ConfigError

DEFAULT_SCHEMA = "animus"
#: PostgreSQL's limit on an identifier's length, in bytes.
MAX_SCHEMA_CHARS = 63
_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
#: The advisory lock migrations take: one for every animus schema of a database (a few
#: milliseconds, once per process). Any 64-bit number of our own; this one spells "animusPG".
MIGRATION_LOCK = 0x616E696D75735047
#: A statement run with this setting on (`set_config(..., true)`: for its transaction) leaves
#: the statistics to its caller: `delete_scope` drops a scope's statistics whole instead.
SKIP_STATS = "animus.skip_stats"
#: The ledger's key, (scope, key, version): a writer recording a version another recorded
#: first breaks it, which is a conflict (`connection.Database.error`).
LEDGER_KEY = "ledger_key_version"


def schema_problem(schema: object) -> str | None:
    """Why `schema` is no schema name the store uses (a plain lowercase identifier), or None."""
    if (
        isinstance(schema, str)
        and _NAME.match(schema)
        and len(schema) <= MAX_SCHEMA_CHARS
        and not schema.startswith("pg_")
    ):
        return None
    return (
        f"{str(schema)[:80]!r} is not a schema name this store uses; use lowercase letters, "
        f"digits and '_' (at most {MAX_SCHEMA_CHARS}, not starting with a digit or pg_), e.g. "
        "animus"
    )


def language_problem(language: object) -> str | None:
    """Why `language` cannot name a text search configuration (`english`, `simple`,
    `myschema.custom`), or None; the server checks that it exists."""
    parts = language.split(".") if isinstance(language, str) else []
    if 1 <= len(parts) <= 2 and all(_NAME.match(part) for part in parts):
        return None
    return (
        f"{str(language)[:80]!r} is not a text search configuration name; use a lowercase "
        "name such as english, german or simple (optionally schema.name)"
    )


def check_schema_name(schema: object) -> str:
    """`schema` when it is a plain lowercase PostgreSQL identifier; ConfigError otherwise."""
    problem = schema_problem(schema)
    if problem is not None:
        raise ConfigError(f"schema {problem}")
    return schema  # type: ignore[return-value]


def quoted(schema: str) -> str:
    """The schema as an SQL identifier (its name is checked: lowercase letters, digits, `_`)."""
    return f'"{schema}"'


class Statements:
    """The SQL templates of the store (`{s}` standing for the schema), made for one schema,
    each once."""

    def __init__(self, schema: str) -> None:
        self._schema = quoted(check_schema_name(schema))
        self._made: dict[str, str] = {}

    def __call__(self, template: str) -> str:
        made = self._made.get(template)
        if made is None:
            made = self._made[template] = template.replace("{s}", self._schema)
        return made


@dataclass(frozen=True)
class Migration:
    """One step of the schema: its version, what it does, and its statements for a schema
    name (already checked by `check_schema_name`, so it is spliced in as is)."""

    version: int
    description: str
    statements: Callable[[str], list[str]]


def _tables(s: str) -> list[str]:
    return [
        f"CREATE TABLE {s}.meta (name text PRIMARY KEY, value text NOT NULL)",
        f"CREATE SEQUENCE {s}.scope_versions",
        f"""CREATE TABLE {s}.scopes (
            id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            project_id text COLLATE "C" NOT NULL,
            agent_id text COLLATE "C" NOT NULL,
            task_id text COLLATE "C" NOT NULL,
            items bigint NOT NULL DEFAULT 0,
            terms bigint NOT NULL DEFAULT 0,
            version bigint NOT NULL DEFAULT 0,
            previous_version bigint NOT NULL DEFAULT 0,
            UNIQUE (project_id, agent_id, task_id)
        )""",
        f"""CREATE TABLE {s}.items (
            id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            scope_id bigint NOT NULL,
            key text COLLATE "C" NOT NULL,
            value text NOT NULL,
            metadata text NOT NULL,
            created_at timestamptz NOT NULL,
            updated_at timestamptz NOT NULL,
            expires_at timestamptz,
            tsv tsvector NOT NULL,
            postings text[] NOT NULL,
            length integer NOT NULL,
            UNIQUE (scope_id, key)
        )""",
        f"CREATE INDEX items_text ON {s}.items USING gin (postings)",
        f"CREATE INDEX items_by_recency ON {s}.items (scope_id, updated_at DESC, id DESC)",
        f"CREATE INDEX items_by_expiry ON {s}.items (expires_at) WHERE expires_at IS NOT NULL",
        f"""CREATE TABLE {s}.term_df (
            scope_id bigint NOT NULL,
            lexeme text COLLATE "C" NOT NULL,
            df bigint NOT NULL,
            PRIMARY KEY (scope_id, lexeme)
        )""",
        f"""CREATE TABLE {s}.item_vectors (
            item_id bigint PRIMARY KEY REFERENCES {s}.items (id) ON DELETE CASCADE,
            scope_id bigint NOT NULL,
            vector bytea NOT NULL
        )""",
        f"CREATE INDEX item_vectors_by_scope ON {s}.item_vectors (scope_id)",
    ]


def _statistics(s: str) -> list[str]:
    """The functions and statement triggers that keep `term_df` and the scope counters."""
    skip = f"current_setting('{SKIP_STATS}', true) = 'on'"
    return [
        # (scope, lexeme, +1/-1) rows of a change, summed: one upsert per lexeme of a scope,
        # in key order; lexemes no item holds any more are dropped
        f"""CREATE FUNCTION {s}.add_term_counts(scope_ids bigint[], lexemes text[], deltas bigint[])
        RETURNS void LANGUAGE plpgsql AS $$
        DECLARE gone_scopes bigint[]; gone_lexemes text[];
        BEGIN
            WITH changed AS (
                INSERT INTO {s}.term_df AS d (scope_id, lexeme, df)
                SELECT c.scope_id, c.lexeme, sum(c.delta)
                FROM unnest(scope_ids, lexemes, deltas) AS c (scope_id, lexeme, delta)
                GROUP BY 1, 2 HAVING sum(c.delta) <> 0 ORDER BY 1, 2
                ON CONFLICT (scope_id, lexeme) DO UPDATE SET df = d.df + excluded.df
                RETURNING d.scope_id, d.lexeme, d.df
            )
            SELECT array_agg(scope_id), array_agg(lexeme) INTO gone_scopes, gone_lexemes
            FROM changed WHERE df <= 0;
            IF gone_scopes IS NOT NULL THEN
                DELETE FROM {s}.term_df d USING unnest(gone_scopes, gone_lexemes) AS g (s, l)
                WHERE d.scope_id = g.s AND d.lexeme = g.l AND d.df <= 0;
            END IF;
        END $$""",
        f"""CREATE FUNCTION {s}.items_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF {skip} THEN RETURN NULL; END IF;
            -- only additions: one upsert, no lexeme to drop
            INSERT INTO {s}.term_df AS d (scope_id, lexeme, df)
            SELECT n.scope_id, u.lexeme, count(*)
            FROM new_rows n, unnest(tsvector_to_array(n.tsv)) AS u (lexeme)
            GROUP BY 1, 2 ORDER BY 1, 2
            ON CONFLICT (scope_id, lexeme) DO UPDATE SET df = d.df + excluded.df;
            UPDATE {s}.scopes s SET items = s.items + c.items, terms = s.terms + c.terms
            FROM (SELECT scope_id, count(*) AS items, sum(length) AS terms
                  FROM new_rows GROUP BY 1) c
            WHERE s.id = c.scope_id;
            RETURN NULL;
        END $$""",
        f"""CREATE FUNCTION {s}.items_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF {skip} THEN RETURN NULL; END IF;
            PERFORM {s}.add_term_counts(array_agg(o.scope_id), array_agg(u.lexeme),
                                        array_agg(-1::bigint))
            FROM old_rows o, unnest(tsvector_to_array(o.tsv)) AS u (lexeme);
            UPDATE {s}.scopes s SET items = s.items - c.items, terms = s.terms - c.terms
            FROM (SELECT scope_id, count(*) AS items, sum(length) AS terms
                  FROM old_rows GROUP BY 1) c
            WHERE s.id = c.scope_id;
            RETURN NULL;
        END $$""",
        f"""CREATE FUNCTION {s}.items_updated() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF {skip} THEN RETURN NULL; END IF;
            PERFORM {s}.add_term_counts(array_agg(c.scope_id), array_agg(c.lexeme),
                                        array_agg(c.delta))
            FROM (
                SELECT n.scope_id, u.lexeme, 1::bigint AS delta
                FROM new_rows n, unnest(tsvector_to_array(n.tsv)) AS u (lexeme)
                UNION ALL
                SELECT o.scope_id, u.lexeme, -1::bigint
                FROM old_rows o, unnest(tsvector_to_array(o.tsv)) AS u (lexeme)
            ) c;
            UPDATE {s}.scopes s SET terms = s.terms + c.terms
            FROM (SELECT scope_id, sum(length) AS terms FROM (
                      SELECT scope_id, length FROM new_rows
                      UNION ALL SELECT scope_id, -length FROM old_rows) t
                  GROUP BY 1) c
            WHERE s.id = c.scope_id AND c.terms <> 0;
            RETURN NULL;
        END $$""",
        f"""CREATE TRIGGER items_inserted AFTER INSERT ON {s}.items
        REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT
        EXECUTE FUNCTION {s}.items_inserted()""",
        f"""CREATE TRIGGER items_deleted AFTER DELETE ON {s}.items
        REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT
        EXECUTE FUNCTION {s}.items_deleted()""",
        f"""CREATE TRIGGER items_updated AFTER UPDATE ON {s}.items
        REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT
        EXECUTE FUNCTION {s}.items_updated()""",
    ]


def _version_1(s: str) -> list[str]:
    return [*_tables(s), *_statistics(s)]


def _ledger(s: str) -> list[str]:
    """The ledger (version 2); each item live when it is created starts its history at
    version 1, valid from its last write, recorded now."""
    return [
        f"""CREATE TABLE {s}.ledger (
            scope_id bigint NOT NULL,
            key text COLLATE "C" NOT NULL,
            version bigint NOT NULL,
            op text NOT NULL CHECK (op IN ('create', 'update', 'delete')),
            value text,
            metadata text,
            valid_from timestamptz NOT NULL,
            valid_to timestamptz,
            recorded_at timestamptz NOT NULL,
            CONSTRAINT {LEDGER_KEY} PRIMARY KEY (scope_id, key, version)
        )""",
        f"""INSERT INTO {s}.ledger
            (scope_id, key, version, op, value, metadata, valid_from, valid_to, recorded_at)
        SELECT scope_id, key, 1, 'create', value, metadata, updated_at, expires_at, now()
        FROM {s}.items WHERE expires_at IS NULL OR expires_at > now()""",
    ]


def _embedding_queue(s: str) -> list[str]:
    """The queue of items waiting for vectors (version 3)."""
    return [
        f"""CREATE TABLE {s}.embedding_queue (
            item_id bigint PRIMARY KEY REFERENCES {s}.items (id) ON DELETE CASCADE,
            queued_at timestamptz NOT NULL,
            claimed_until timestamptz,
            claimed_by integer
        )""",
        f"CREATE INDEX embedding_queue_newest"
        f" ON {s}.embedding_queue (queued_at DESC, item_id DESC)",
    ]


MIGRATIONS: list[Migration] = [
    Migration(1, "scopes, items with a tsvector, per-scope term statistics, vectors", _version_1),
    Migration(2, "the ledger of every change", _ledger),
    Migration(3, "the queue of items waiting for vectors", _embedding_queue),
]
SCHEMA_VERSION = MIGRATIONS[-1].version
