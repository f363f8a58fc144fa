"""Entity extraction: what the capitalized-phrase heuristics find, type, and skip."""

import pytest

from animus_flows.memory import Entity
from animus_flows.memory.entities import extract_entities, query_entity_keys


def test_the_seed_example_finds_alice_and_animus():
    assert extract_entities("Review pull request from Alice on the Animus project") == [
        Entity("Alice", "person"),
        Entity("Animus", "project"),
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Bob said GitHub Actions is flaky.", [("Bob", "person"), ("GitHub Actions", "unknown")]),
        (
            "We met Acme Inc in New York City.",
            [("Acme Inc", "organization"), ("New York City", "unknown")],
        ),
        ("- Deploy to S3\n- Ping Dave", [("S3", "unknown"), ("Dave", "person")]),
        (
            "Talked with Jean-Luc Picard about the Enterprise repo",
            [("Jean-Luc Picard", "person"), ("Enterprise", "project")],
        ),
        ("ask Carol O'Neil; AWS is down", [("Carol O'Neil", "person"), ("AWS", "unknown")]),
    ],
)
def test_names_and_types(text, expected):
    assert [(e.name, e.type) for e in extract_entities(text)] == expected


@pytest.mark.parametrize(
    "text",
    [
        "i like pizza. nothing capitalized here",
        "The build is green. Tomorrow we ship. Deploy it.",
        "Monday and Friday are release days",
        "It works. This is fine. Please check.",
    ],
)
def test_grammar_capitals_are_not_entities(text):
    assert extract_entities(text) == []


def test_redaction_markers_are_not_entities():
    assert extract_entities("token [REDACTED:jwt] sent to Alice by mail") == [
        Entity("Alice", "unknown")
    ]


def test_one_entity_per_name_whatever_the_case_first_mention_kept():
    found = extract_entities("met ALICE today; alice and Alice too, then Alice again")
    assert found == [Entity("ALICE", "unknown")]


def test_extraction_is_bounded():
    text = " ".join(f"met Person{n} today." for n in range(100))
    assert len(extract_entities(text, max_entities=5)) == 5


def test_query_keys_cover_every_short_phrase_in_lowercase():
    keys = query_entity_keys("What did Alice say about the Animus Flows project?")
    assert {"alice", "animus", "animus flows", "the animus flows"} <= set(keys)
    assert "the" not in keys and "what" not in keys
    assert len(query_entity_keys("word " * 200)) == 3  # one key per phrase length: deduplicated
    assert len(query_entity_keys(" ".join(f"w{n}" for n in range(200)))) == 64


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Berlin is cold.", []),  # a sentence-initial name without a person verb
        ("alice met bob", []),  # lowercase names
        ("flew in from Berlin", [("Berlin", "person")]),  # a cue word guesses wrong
        ("met Alice Bob today", [("Alice Bob", "unknown")]),  # adjacent names merge
    ],
)
def test_the_documented_limits_hold(text, expected):
    assert [(e.name, e.type) for e in extract_entities(text)] == expected
