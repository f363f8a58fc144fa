"""The store many workers share: PostgreSQL, ranked with BM25 over `tsvector`s.

Text is analyzed by the store's text search configuration (`english` by default: PostgreSQL's
parser, Snowball stemmer and stop words), so "explored" finds "exploring" and a query of stop
words only finds nothing. Word rarity is measured within the scope searched (per-scope document
frequencies, kept by triggers), and the index is partitioned by scope: a query reads only its
scope's postings, and no character in an id can reach another scope's items. With an embedder,
items carry vectors (in the database) and queries fuse the two rankings, as the SQLite store
does. Many processes on many machines write at once: each write locks its scopes' rows first,
in one order, so nothing is lost and nothing deadlocks.

Every change is recorded in a ledger, in the change's transaction (`animus_flows.ledger`).

Modules: `schema` (tables, triggers, migrations), `prepare` (migrating on first connect, the
language and model checks), `connection` (pools, errors without the DSN), `writes`, `ledger`,
`reads`, `lexical` (BM25 ranking), `search` (one query, with the vector leg), `reindex`,
`store` (the `PostgresStore` protocol methods). Needs `pip install "animus-flows[postgres]"`.
"""

from animus_flows.stores.postgres.store import MAX_QUERY_TOP_K, PostgresStore

__all__ = ["MAX_QUERY_TOP_K", "PostgresStore"]
