"""The embedded default store: one SQLite file, ranked with BM25 over stemmed words.

Text is analyzed as search engines do (`animus_flows.stores.analysis`): stop words dropped,
words stemmed, so "explored" finds "exploring" and "what did she say" ranks by what she said.
Word rarity is measured within the scope searched, not the whole file (`lexical`), and the index
is partitioned by scope (`schema`): a query reads only its scope's postings, and no character in
an id can leak items across scopes. WAL and a busy timeout let several processes write; writes
run on the store's own thread and reads inline on a read-only connection (`connection`).

Modules: `schema` (tables, what the file records), `connection` (the file, its writer and
reader), `index` (writes, with the postings and statistics in step), `lexical` (ranking),
`search` (one query: a listing, the ranking, its fusion with the vector leg), `store` (the
`SQLiteStore` protocol methods), `ledger` (the ledger of every change a file may keep) and
`ledger_store` (`SQLiteLedgerStore`, which keeps one and reads it).
"""

from animus_flows.stores.sqlite.ledger_store import SQLiteLedgerStore
from animus_flows.stores.sqlite.reads import bm25_score
from animus_flows.stores.sqlite.store import MAX_QUERY_TOP_K, SQLiteStore

__all__ = ["MAX_QUERY_TOP_K", "SQLiteLedgerStore", "SQLiteStore", "bm25_score"]
