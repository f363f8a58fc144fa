-- A PostgreSQL store schema written by animus-flows before the ledger (main at 4efeff8, schema
-- version 1): pg_dump --schema=animus_schema1 --inserts --no-owner --no-privileges, psql's
-- \restrict lines removed. PostgresStore(dsn, schema='animus_schema1') put 'plain' into project
-- legacy (metadata tier hot), 'expired' (a one-second TTL, long expired) into legacy/dev/T-1,
-- 'century' (a century's TTL) and 'harbour' into legacy/dev. tests/stores/test_postgres_ledger.py
-- loads it under a schema name of its own.
--
-- PostgreSQL database dump
--


-- Dumped from database version 15.18 (Debian 15.18-0+deb12u1)
-- Dumped by pg_dump version 15.18 (Debian 15.18-0+deb12u1)

SET statement_timeout = 0;
SET lock_timeout = 0;
SET idle_in_transaction_session_timeout = 0;
SET client_encoding = 'UTF8';
SET standard_conforming_strings = on;
SELECT pg_catalog.set_config('search_path', '', false);
SET check_function_bodies = false;
SET xmloption = content;
SET client_min_messages = warning;
SET row_security = off;

--
-- Name: animus_schema1; Type: SCHEMA; Schema: -; Owner: -
--

CREATE SCHEMA animus_schema1;


--
-- Name: add_term_counts(bigint[], text[], bigint[]); Type: FUNCTION; Schema: animus_schema1; Owner: -
--

CREATE FUNCTION animus_schema1.add_term_counts(scope_ids bigint[], lexemes text[], deltas bigint[]) RETURNS void
    LANGUAGE plpgsql
    AS $$
        DECLARE gone_scopes bigint[]; gone_lexemes text[];
        BEGIN
            WITH changed AS (
                INSERT INTO "animus_schema1".term_df AS d (scope_id, lexeme, df)
                SELECT c.scope_id, c.lexeme, sum(c.delta)
                FROM unnest(scope_ids, lexemes, deltas) AS c (scope_id, lexeme, delta)
                GROUP BY 1, 2 HAVING sum(c.delta) <> 0 ORDER BY 1, 2
                ON CONFLICT (scope_id, lexeme) DO UPDATE SET df = d.df + excluded.df
                RETURNING d.scope_id, d.lexeme, d.df
            )
            SELECT array_agg(scope_id), array_agg(lexeme) INTO gone_scopes, gone_lexemes
            FROM changed WHERE df <= 0;
            IF gone_scopes IS NOT NULL THEN
                DELETE FROM "animus_schema1".term_df d USING unnest(gone_scopes, gone_lexemes) AS g (s, l)
                WHERE d.scope_id = g.s AND d.lexeme = g.l AND d.df <= 0;
            END IF;
        END $$;


--
-- Name: items_deleted(); Type: FUNCTION; Schema: animus_schema1; Owner: -
--

CREATE FUNCTION animus_schema1.items_deleted() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
        BEGIN
            IF current_setting('animus.skip_stats', true) = 'on' THEN RETURN NULL; END IF;
            PERFORM "animus_schema1".add_term_counts(array_agg(o.scope_id), array_agg(u.lexeme),
                                        array_agg(-1::bigint))
            FROM old_rows o, unnest(tsvector_to_array(o.tsv)) AS u (lexeme);
            UPDATE "animus_schema1".scopes s SET items = s.items - c.items, terms = s.terms - c.terms
            FROM (SELECT scope_id, count(*) AS items, sum(length) AS terms
                  FROM old_rows GROUP BY 1) c
            WHERE s.id = c.scope_id;
            RETURN NULL;
        END $$;


--
-- Name: items_inserted(); Type: FUNCTION; Schema: animus_schema1; Owner: -
--

CREATE FUNCTION animus_schema1.items_inserted() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
        BEGIN
            IF current_setting('animus.skip_stats', true) = 'on' THEN RETURN NULL; END IF;
            -- only additions: one upsert, no lexeme to drop
            INSERT INTO "animus_schema1".term_df AS d (scope_id, lexeme, df)
            SELECT n.scope_id, u.lexeme, count(*)
            FROM new_rows n, unnest(tsvector_to_array(n.tsv)) AS u (lexeme)
            GROUP BY 1, 2 ORDER BY 1, 2
            ON CONFLICT (scope_id, lexeme) DO UPDATE SET df = d.df + excluded.df;
            UPDATE "animus_schema1".scopes s SET items = s.items + c.items, terms = s.terms + c.terms
            FROM (SELECT scope_id, count(*) AS items, sum(length) AS terms
                  FROM new_rows GROUP BY 1) c
            WHERE s.id = c.scope_id;
            RETURN NULL;
        END $$;


--
-- Name: items_updated(); Type: FUNCTION; Schema: animus_schema1; Owner: -
--

CREATE FUNCTION animus_schema1.items_updated() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
        BEGIN
            IF current_setting('animus.skip_stats', true) = 'on' THEN RETURN NULL; END IF;
            PERFORM "animus_schema1".add_term_counts(array_agg(c.scope_id), array_agg(c.lexeme),
                                        array_agg(c.delta))
            FROM (
                SELECT n.scope_id, u.lexeme, 1::bigint AS delta
                FROM new_rows n, unnest(tsvector_to_array(n.tsv)) AS u (lexeme)
                UNION ALL
                SELECT o.scope_id, u.lexeme, -1::bigint
                FROM old_rows o, unnest(tsvector_to_array(o.tsv)) AS u (lexeme)
            ) c;
            UPDATE "animus_schema1".scopes s SET terms = s.terms + c.terms
            FROM (SELECT scope_id, sum(length) AS terms FROM (
                      SELECT scope_id, length FROM new_rows
                      UNION ALL SELECT scope_id, -length FROM old_rows) t
                  GROUP BY 1) c
            WHERE s.id = c.scope_id AND c.terms <> 0;
            RETURN NULL;
        END $$;


SET default_tablespace = '';

SET default_table_access_method = heap;

--
-- Name: item_vectors; Type: TABLE; Schema: animus_schema1; Owner: -
--

CREATE TABLE animus_schema1.item_vectors (
    item_id bigint NOT NULL,
    scope_id bigint NOT NULL,
    vector bytea NOT NULL
);


--
-- Name: items; Type: TABLE; Schema: animus_schema1; Owner: -
--

CREATE TABLE animus_schema1.items (
    id bigint NOT NULL,
    scope_id bigint NOT NULL,
    key text NOT NULL COLLATE pg_catalog."C",
    value text NOT NULL,
    metadata text NOT NULL,
    created_at timestamp with time zone NOT NULL,
    updated_at timestamp with time zone NOT NULL,
    expires_at timestamp with time zone,
    tsv tsvector NOT NULL,
    postings text[] NOT NULL,
    length integer NOT NULL
);


--
-- Name: items_id_seq; Type: SEQUENCE; Schema: animus_schema1; Owner: -
--

ALTER TABLE animus_schema1.items ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME animus_schema1.items_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);


--
-- Name: meta; Type: TABLE; Schema: animus_schema1; Owner: -
--

CREATE TABLE animus_schema1.meta (
    name text NOT NULL,
    value text NOT NULL
);


--
-- Name: schema_migrations; Type: TABLE; Schema: animus_schema1; Owner: -
--

CREATE TABLE animus_schema1.schema_migrations (
    version integer NOT NULL,
    description text NOT NULL,
    applied_at timestamp with time zone DEFAULT now() NOT NULL
);


--
-- Name: scope_versions; Type: SEQUENCE; Schema: animus_schema1; Owner: -
--

CREATE SEQUENCE animus_schema1.scope_versions
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: scopes; Type: TABLE; Schema: animus_schema1; Owner: -
--

CREATE TABLE animus_schema1.scopes (
    id bigint NOT NULL,
    project_id text NOT NULL COLLATE pg_catalog."C",
    agent_id text NOT NULL COLLATE pg_catalog."C",
    task_id text NOT NULL COLLATE pg_catalog."C",
    items bigint DEFAULT 0 NOT NULL,
    terms bigint DEFAULT 0 NOT NULL,
    version bigint DEFAULT 0 NOT NULL,
    previous_version bigint DEFAULT 0 NOT NULL
);


--
-- Name: scopes_id_seq; Type: SEQUENCE; Schema: animus_schema1; Owner: -
--

ALTER TABLE animus_schema1.scopes ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME animus_schema1.scopes_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);


--
-- Name: term_df; Type: TABLE; Schema: animus_schema1; Owner: -
--

CREATE TABLE animus_schema1.term_df (
    scope_id bigint NOT NULL,
    lexeme text NOT NULL COLLATE pg_catalog."C",
    df bigint NOT NULL
);


--
-- Data for Name: item_vectors; Type: TABLE DATA; Schema: animus_schema1; Owner: -
--



--
-- Data for Name: items; Type: TABLE DATA; Schema: animus_schema1; Owner: -
--

INSERT INTO animus_schema1.items OVERRIDING SYSTEM VALUE VALUES (1, 1, 'plain', '"written by schema 1 before the ledger"', '{"tier":"hot"}', '2026-12-05 20:15:02.40151+00', '2026-12-05 20:15:02.40151+00', NULL, '''1'':4 ''ledger'':7 ''schema'':3 ''written'':1', '{1x1,1xledger,1xschema,1xwritten}', 4);
INSERT INTO animus_schema1.items OVERRIDING SYSTEM VALUE VALUES (2, 2, 'expired', '"gone soon"', '{}', '2026-12-05 20:15:02.410992+00', '2026-12-05 20:15:02.410992+00', '2026-12-05 20:15:03.410971+00', '''gone'':1 ''soon'':2', '{2xgone,2xsoon}', 2);
INSERT INTO animus_schema1.items OVERRIDING SYSTEM VALUE VALUES (3, 3, 'century', '"kept a century"', '{}', '2026-12-05 20:15:02.417087+00', '2026-12-05 20:15:02.417087+00', '2126-11-11 20:15:02.417071+00', '''centuri'':3 ''kept'':1', '{3xcenturi,3xkept}', 2);
INSERT INTO animus_schema1.items OVERRIDING SYSTEM VALUE VALUES (4, 3, 'harbour', '"The harbour crane was explored on Tuesday"', '{}', '2026-12-05 20:15:02.420012+00', '2026-12-05 20:15:02.420012+00', NULL, '''crane'':3 ''explor'':5 ''harbour'':2 ''tuesday'':7', '{3xcrane,3xexplor,3xharbour,3xtuesday}', 4);


--
-- Data for Name: meta; Type: TABLE DATA; Schema: animus_schema1; Owner: -
--

INSERT INTO animus_schema1.meta VALUES ('language', 'english');


--
-- Data for Name: schema_migrations; Type: TABLE DATA; Schema: animus_schema1; Owner: -
--

INSERT INTO animus_schema1.schema_migrations VALUES (1, 'scopes, items with a tsvector, per-scope term statistics, vectors', '2026-12-05 20:15:02.378929+00');


--
-- Data for Name: scopes; Type: TABLE DATA; Schema: animus_schema1; Owner: -
--

INSERT INTO animus_schema1.scopes OVERRIDING SYSTEM VALUE VALUES (1, 'legacy', '', '', 1, 4, 1, 0);
INSERT INTO animus_schema1.scopes OVERRIDING SYSTEM VALUE VALUES (2, 'legacy', 'dev', 'T-1', 1, 2, 2, 0);
INSERT INTO animus_schema1.scopes OVERRIDING SYSTEM VALUE VALUES (3, 'legacy', 'dev', '', 2, 6, 4, 3);


--
-- Data for Name: term_df; Type: TABLE DATA; Schema: animus_schema1; Owner: -
--

INSERT INTO animus_schema1.term_df VALUES (1, '1', 1);
INSERT INTO animus_schema1.term_df VALUES (1, 'ledger', 1);
INSERT INTO animus_schema1.term_df VALUES (1, 'schema', 1);
INSERT INTO animus_schema1.term_df VALUES (1, 'written', 1);
INSERT INTO animus_schema1.term_df VALUES (2, 'gone', 1);
INSERT INTO animus_schema1.term_df VALUES (2, 'soon', 1);
INSERT INTO animus_schema1.term_df VALUES (3, 'centuri', 1);
INSERT INTO animus_schema1.term_df VALUES (3, 'kept', 1);
INSERT INTO animus_schema1.term_df VALUES (3, 'crane', 1);
INSERT INTO animus_schema1.term_df VALUES (3, 'explor', 1);
INSERT INTO animus_schema1.term_df VALUES (3, 'harbour', 1);
INSERT INTO animus_schema1.term_df VALUES (3, 'tuesday', 1);


--
-- Name: items_id_seq; Type: SEQUENCE SET; Schema: animus_schema1; Owner: -
--

SELECT pg_catalog.setval('animus_schema1.items_id_seq', 4, true);


--
-- Name: scope_versions; Type: SEQUENCE SET; Schema: animus_schema1; Owner: -
--

SELECT pg_catalog.setval('animus_schema1.scope_versions', 4, true);


--
-- Name: scopes_id_seq; Type: SEQUENCE SET; Schema: animus_schema1; Owner: -
--

SELECT pg_catalog.setval('animus_schema1.scopes_id_seq', 4, true);


--
-- Name: item_vectors item_vectors_pkey; Type: CONSTRAINT; Schema: animus_schema1; Owner: -
--

ALTER TABLE ONLY animus_schema1.item_vectors
    ADD CONSTRAINT item_vectors_pkey PRIMARY KEY (item_id);


--
-- Name: items items_pkey; Type: CONSTRAINT; Schema: animus_schema1; Owner: -
--

ALTER TABLE ONLY animus_schema1.items
    ADD CONSTRAINT items_pkey PRIMARY KEY (id);


--
-- Name: items items_scope_id_key_key; Type: CONSTRAINT; Schema: animus_schema1; Owner: -
--

ALTER TABLE ONLY animus_schema1.items
    ADD CONSTRAINT items_scope_id_key_key UNIQUE (scope_id, key);


--
-- Name: meta meta_pkey; Type: CONSTRAINT; Schema: animus_schema1; Owner: -
--

ALTER TABLE ONLY animus_schema1.meta
    ADD CONSTRAINT meta_pkey PRIMARY KEY (name);


--
-- Name: schema_migrations schema_migrations_pkey; Type: CONSTRAINT; Schema: animus_schema1; Owner: -
--

ALTER TABLE ONLY animus_schema1.schema_migrations
    ADD CONSTRAINT schema_migrations_pkey PRIMARY KEY (version);


--
-- Name: scopes scopes_pkey; Type: CONSTRAINT; Schema: animus_schema1; Owner: -
--

ALTER TABLE ONLY animus_schema1.scopes
    ADD CONSTRAINT scopes_pkey PRIMARY KEY (id);


--
-- Name: scopes scopes_project_id_agent_id_task_id_key; Type: CONSTRAINT; Schema: animus_schema1; Owner: -
--

ALTER TABLE ONLY animus_schema1.scopes
    ADD CONSTRAINT scopes_project_id_agent_id_task_id_key UNIQUE (project_id, agent_id, task_id);


--
-- Name: term_df term_df_pkey; Type: CONSTRAINT; Schema: animus_schema1; Owner: -
--

ALTER TABLE ONLY animus_schema1.term_df
    ADD CONSTRAINT term_df_pkey PRIMARY KEY (scope_id, lexeme);


--
-- Name: item_vectors_by_scope; Type: INDEX; Schema: animus_schema1; Owner: -
--

CREATE INDEX item_vectors_by_scope ON animus_schema1.item_vectors USING btree (scope_id);


--
-- Name: items_by_expiry; Type: INDEX; Schema: animus_schema1; Owner: -
--

CREATE INDEX items_by_expiry ON animus_schema1.items USING btree (expires_at) WHERE (expires_at IS NOT NULL);


--
-- Name: items_by_recency; Type: INDEX; Schema: animus_schema1; Owner: -
--

CREATE INDEX items_by_recency ON animus_schema1.items USING btree (scope_id, updated_at DESC, id DESC);


--
-- Name: items_text; Type: INDEX; Schema: animus_schema1; Owner: -
--

CREATE INDEX items_text ON animus_schema1.items USING gin (postings);


--
-- Name: items items_deleted; Type: TRIGGER; Schema: animus_schema1; Owner: -
--

CREATE TRIGGER items_deleted AFTER DELETE ON animus_schema1.items REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION animus_schema1.items_deleted();


--
-- Name: items items_inserted; Type: TRIGGER; Schema: animus_schema1; Owner: -
--

CREATE TRIGGER items_inserted AFTER INSERT ON animus_schema1.items REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION animus_schema1.items_inserted();


--
-- Name: items items_updated; Type: TRIGGER; Schema: animus_schema1; Owner: -
--

CREATE TRIGGER items_updated AFTER UPDATE ON animus_schema1.items REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION animus_schema1.items_updated();


--
-- Name: item_vectors item_vectors_item_id_fkey; Type: FK CONSTRAINT; Schema: animus_schema1; Owner: -
--

ALTER TABLE ONLY animus_schema1.item_vectors
    ADD CONSTRAINT item_vectors_item_id_fkey FOREIGN KEY (item_id) REFERENCES animus_schema1.items(id) ON DELETE CASCADE;


--
-- PostgreSQL database dump complete
--


