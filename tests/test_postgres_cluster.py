"""The throwaway PostgreSQL cluster the PostgreSQL tests run on."""

import psycopg


def test_cluster_serves_a_database_with_english_text_search(postgres_dsn):
    with psycopg.connect(postgres_dsn) as conn:
        (vector,) = conn.execute(
            "SELECT to_tsvector('english', 'explorers were exploring')"
        ).fetchone()
    assert vector == "'explor':1,3"


def test_create_database_is_idempotent(postgres_cluster):
    first = postgres_cluster.create_database("twice")
    assert postgres_cluster.create_database("twice") == first
