"""The in-memory vector index: rows per scope, exact cosine search, BLOB round trips."""

import random
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from animus_flows.errors import InvalidRequest
from animus_flows.protocol import Scope
from animus_flows.stores.vectors import (
    DEFAULT_MIN_SIMILARITY,
    SPLIT_ROWS,
    VectorIndex,
    vector_from_bytes,
    vector_to_bytes,
    vectors_from_bytes,
)
from animus_flows.testing.conformance import AWKWARD_ID_PAIRS

D = 8


def unit(seed: int, dimension: int = D) -> np.ndarray:
    vector = np.random.default_rng(seed).standard_normal(dimension).astype(np.float32)
    return vector / np.linalg.norm(vector)


def exact(vectors: dict, query: np.ndarray, k: int, floor: float) -> list:
    scored = [(i, float(v @ query / np.linalg.norm(v))) for i, v in vectors.items()]
    scored = [(i, s) for i, s in scored if s >= floor]
    return sorted(scored, key=lambda pair: -pair[1])[:k]


def test_search_returns_the_nearest_rows_best_first_with_their_cosine():
    index = VectorIndex(D, min_similarity=-1)
    vectors = {i: unit(i) for i in range(200)}
    index.add_many("s", list(vectors), np.stack(list(vectors.values())))
    query = unit(1000)
    hits = index.search("s", query, k=10)
    expected = exact(vectors, query, 10, -1)
    assert [i for i, _ in hits] == [i for i, _ in expected]
    np.testing.assert_allclose([s for _, s in hits], [s for _, s in expected], atol=1e-5)
    assert all(isinstance(s, float) for _, s in hits)


def test_a_large_scope_is_searched_in_two_halves_with_the_same_hits():
    # from SPLIT_ROWS rows the product runs in two halves, one on a helper thread
    rows = SPLIT_ROWS + 1001  # odd: the halves differ in length
    matrix = np.random.default_rng(3).standard_normal((rows, D)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    index = VectorIndex(D, min_similarity=-1)
    index.add_many("s", list(range(rows)), matrix)
    for seed in range(5):
        query = unit(seed)
        cosines = matrix @ query
        best = np.argsort(-cosines, kind="stable")[:20]
        hits = index.search("s", query, k=20)
        assert [i for i, _ in hits] == best.tolist()
        np.testing.assert_allclose([s for _, s in hits], cosines[best], atol=1e-5)
        # the last row, in the helper's half, is found when it is the nearest
        assert index.search("s", matrix[-1], k=1)[0][0] == rows - 1


def test_vectors_are_normalized_as_they_are_added():
    index = VectorIndex(2, min_similarity=-1)
    index.add("s", "a", [3.0, 4.0])
    np.testing.assert_allclose(index.get("s", "a"), [0.6, 0.8], atol=1e-6)
    ((item, score),) = index.search("s", [30.0, 40.0], k=1)
    assert item == "a"
    assert score == pytest.approx(1.0, abs=1e-6)
    assert score <= 1.0


def test_the_floor_leaves_out_dissimilar_rows():
    index = VectorIndex(2)
    assert index.min_similarity == DEFAULT_MIN_SIMILARITY
    index.add_many("s", ["same", "near", "far"], [[1, 0], [0.8, 0.6], [0, 1]])
    assert [i for i, _ in index.search("s", [1, 0], k=10)] == ["same", "near"]
    assert [i for i, _ in index.search("s", [1, 0], k=10, min_similarity=0.9)] == ["same"]
    assert [i for i, _ in index.search("s", [1, 0], k=10, min_similarity=-1)] == [
        "same",
        "near",
        "far",
    ]


def test_the_default_floor_is_the_default_local_models():
    from animus_flows.embedders import LocalEmbedder

    assert LocalEmbedder().similarity_floor == DEFAULT_MIN_SIMILARITY


def test_adding_an_existing_id_replaces_its_vector():
    index = VectorIndex(2, min_similarity=-1)
    index.add("s", 1, [1, 0])
    index.add("s", 1, [0, 1])
    assert index.count("s") == 1
    assert index.search("s", [0, 1], k=5) == [(1, pytest.approx(1.0))]


def test_an_id_given_twice_in_one_batch_keeps_its_last_row():
    index = VectorIndex(2, min_similarity=-1)
    index.add_many("s", [1, 2, 1], [[1, 0], [1, 1], [0, 1]])
    assert index.count("s") == 2
    np.testing.assert_allclose(index.get("s", 1), [0, 1])


def test_remove_and_drop_scope():
    index = VectorIndex(2, min_similarity=-1)
    index.add_many("s", [1, 2, 3], [[1, 0], [0, 1], [1, 1]])
    assert index.remove("s", 1) is True
    assert index.remove("s", 1) is False
    assert index.remove("other", 1) is False
    assert sorted(i for i, _ in index.search("s", [1, 0], k=5)) == [2, 3]
    assert index.get("s", 1) is None
    assert index.drop_scope("s") == 2
    assert index.drop_scope("s") == 0
    assert index.search("s", [1, 0], k=5) == []
    assert "s" not in index
    assert len(index) == 0


def test_removing_every_row_forgets_the_scope_and_its_memory():
    index = VectorIndex(D, min_similarity=-1)
    ids = list(range(1000))
    index.add_many("s", ids, np.stack([unit(i) for i in ids]))
    grown = index.nbytes
    assert grown >= 1000 * D * 4
    assert index.remove_many("s", ids[:990]) == 990
    assert index.nbytes < grown / 4  # the matrix shrinks as rows go
    assert index.remove_many("s", ids) == 10
    assert index.scopes() == []


def test_random_operations_match_a_plain_dict():
    rng = random.Random(7)
    index = VectorIndex(D, min_similarity=-1)
    model: dict[str, dict[int, np.ndarray]] = {"a": {}, "b": {}}
    for step in range(3000):
        scope = rng.choice("ab")
        item = rng.randrange(150)
        if rng.random() < 0.6:
            vector = unit(step)
            index.add(scope, item, vector)
            model[scope][item] = vector
        else:
            assert index.remove(scope, item) == (model[scope].pop(item, None) is not None)
        if step % 100 == 0:
            query = unit(10**6 + step)
            for name in "ab":
                got = index.search(name, query, k=7)
                want = exact(model[name], query, 7, -1)
                assert [i for i, _ in got] == [i for i, _ in want]
                assert index.count(name) == len(model[name])


def test_equal_cosines_keep_the_order_rows_were_first_added():
    index = VectorIndex(2, min_similarity=-1)
    index.add_many("s", ["c", "a", "b", "d"], [[1, 0]] * 4)
    assert [i for i, _ in index.search("s", [1, 0], k=4)] == ["c", "a", "b", "d"]
    assert [i for i, _ in index.search("s", [1, 0], k=2)] == ["c", "a"]
    index.remove("s", "c")  # the last row moves into its place: the order must not change
    index.add("s", "a", [1, 0])  # replacing keeps the first-added position
    assert [i for i, _ in index.search("s", [1, 0], k=4)] == ["a", "b", "d"]


@pytest.mark.parametrize(("one", "other"), AWKWARD_ID_PAIRS)
def test_a_search_never_reaches_another_scope(one, other):
    index = VectorIndex(2, min_similarity=-1)
    index.add(Scope(one), "mine", [1, 0])
    index.add(Scope(other), "theirs", [1, 0])
    assert index.search(Scope(one), [1, 0], k=10) == [("mine", pytest.approx(1.0))]
    assert index.search(Scope(other), [1, 0], k=10) == [("theirs", pytest.approx(1.0))]


@pytest.mark.parametrize(
    "names",
    [
        ("100%", "100_", "100"),
        ("it's", 'it"s', "its"),
        ("café", "cafe", "CAFÉ", "cafe\u0301"),
        ("a/b", "a.b", "a\\b", "a%b"),
        ("東京", "東京 ", "東"),
    ],
)
def test_scope_names_are_compared_exactly(names):
    index = VectorIndex(2, min_similarity=-1)
    for position, name in enumerate(names):
        index.add(Scope("p", agent_id=name), position, [1, 0])
        index.add((name, None, None), position, [1, 0])  # tuples of ids serve as keys too
    for position, name in enumerate(names):
        assert index.search(Scope("p", agent_id=name), [1, 0], k=10) == [
            (position, pytest.approx(1.0))
        ]
        assert [i for i, _ in index.search((name, None, None), [1, 0], k=10)] == [position]
    assert index.search(Scope("p"), [1, 0], k=10) == []  # the project scope holds none


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["x", "x%", "x_", "x'", "ẋ"]), st.integers(0, 20)),
        max_size=40,
    )
)
def test_every_hit_belongs_to_the_scope_searched(writes):
    index = VectorIndex(2, min_similarity=-1)
    owner: dict[tuple[str, int], str] = {}
    for scope, item in writes:
        index.add(scope, (scope, item), [1.0, 0.5])
        owner[(scope, item)] = scope
    for scope in ["x", "x%", "x_", "x'", "ẋ"]:
        for item, _ in index.search(scope, [1, 0], k=100):
            assert owner[item] == scope


def test_concurrent_writers_and_searchers_stay_consistent():
    index = VectorIndex(D, min_similarity=-1)
    errors: list[BaseException] = []
    scopes = [f"scope-{i}" for i in range(4)]

    def writer(seed: int) -> None:
        rng = random.Random(seed)
        try:
            for step in range(400):
                scope = rng.choice(scopes)
                item = (scope, rng.randrange(60))
                if rng.random() < 0.7:
                    index.add(scope, item, unit(seed * 10000 + step))
                else:
                    index.remove(scope, item)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def searcher(seed: int) -> None:
        rng = random.Random(seed)
        try:
            for step in range(400):
                scope = rng.choice(scopes)
                hits = index.search(scope, unit(seed + step), k=20)
                assert all(item[0] == scope for item, _ in hits)
                assert len({item for item, _ in hits}) == len(hits)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(3)]
    threads += [threading.Thread(target=searcher, args=(100 + i,)) for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    for scope in scopes:
        assert index.count(scope) == len(index.search(scope, unit(0), k=1000))


def test_bad_vectors_and_arguments_are_refused():
    index = VectorIndex(3)
    with pytest.raises(InvalidRequest, match=r"shape \(1, 2\); this index holds 3-dimensional"):
        index.add("s", 1, [1, 0])
    with pytest.raises(InvalidRequest, match="NaN or infinite"):
        index.add("s", 1, [1, float("nan"), 0])
    with pytest.raises(InvalidRequest, match="all-zero"):
        index.add("s", 1, [0, 0, 0])
    with pytest.raises(InvalidRequest, match="2 item ids for 1 vectors"):
        index.add_many("s", [1, 2], [[1, 0, 0]])
    with pytest.raises(InvalidRequest, match="not numbers"):
        index.add("s", 1, ["a", "b", "c"])
    with pytest.raises(InvalidRequest, match="k 0 must be a positive integer"):
        index.search("s", [1, 0, 0], k=0)
    with pytest.raises(InvalidRequest, match=r"min_similarity 2 must be a number in \[-1, 1\]"):
        index.search("s", [1, 0, 0], k=1, min_similarity=2)
    with pytest.raises(InvalidRequest, match="positive integer"):
        VectorIndex(0)
    assert len(index) == 0  # nothing half-written


# -- BLOBs --------------------------------------------------------------------------------------


def test_a_vector_round_trips_through_a_little_endian_float32_blob():
    vector = unit(3)
    blob = vector_to_bytes(vector)
    assert len(blob) == 4 * D
    assert blob == vector.astype("<f4").tobytes()
    assert np.frombuffer(blob, dtype="<f4")[0] == vector[0]
    back = vector_from_bytes(blob, D)
    assert back.dtype == np.float32
    np.testing.assert_array_equal(back, vector)
    back[0] = 5  # a writable copy, not a view of the BLOB
    assert vector_to_bytes([1.5, -2.0]) == b"\x00\x00\xc0?\x00\x00\x00\xc0"


def test_many_blobs_decode_into_one_matrix():
    vectors = [unit(i) for i in range(5)]
    matrix = vectors_from_bytes([vector_to_bytes(v) for v in vectors], D)
    assert matrix.shape == (5, D)
    np.testing.assert_array_equal(matrix, np.stack(vectors))
    assert vectors_from_bytes([memoryview(vector_to_bytes(vectors[0]))]).shape == (1, D)


def test_damaged_blobs_say_to_reindex():
    with pytest.raises(InvalidRequest, match=r"has 7 bytes, not 8 .*animus memory reindex"):
        vector_from_bytes(b"\x00" * 7, 2)
    with pytest.raises(InvalidRequest, match="has 12 bytes, not 16"):
        vectors_from_bytes([b"\x00" * 16, b"\x00" * 12])
    with pytest.raises(InvalidRequest, match="one non-empty dimension"):
        vector_to_bytes([[1.0, 2.0]])
