#!/usr/bin/env python
"""Korean and Chinese retrieval over each dev set's own paragraphs (issue #27), as squad-open does for English.

    python bench/retrieval_cjk.py --questions 1000 --runtime onnx --out bench/results/retrieval-cjk.md

For KorQuAD 1.0 dev (ko), CMRC 2018 dev (zh, Simplified) and DRCD dev (zh, Traditional): every paragraph of
the file is indexed (`odqa.indexing.build_index`, one BM25 index per analyser), and every question of the
file is asked. BM25 with each analyser of indexes/analysis.py (whitespace tokens as the baseline), dense
(multilingual e5 through TextEncoder.encode_queries / encode_passages, i.e. the folder's own "query: " /
"passage: " prompts, exact inner product) and hybrids of the language's default analyser with dense, fused by
odqa.core.fusion as the English hybrid is (HybridRetriever, 100 candidates each): the configured default (RRF,
k=60), min-max with alpha 0.5, and the fusion setting with the best R@1 + R@5 on `--tune` (CMRC 2018 trial,
never a dev set). Each retriever's 100-deep lists are computed once per question and the fusions read them.
Recall@k: a top-k passage holds an answer (odqa.eval.answers: substring match for CJK answers); gold
recall@k: a top-k passage is cut from the question's own paragraph. Indexes and passage vectors are cached
under `--cache`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

DATASETS = {  # name: (file under the shared data folder, language, analysers compared)
    "KorQuAD 1.0 dev": ("multilingual/korquad-v1.0-dev.json", "ko", ["whitespace", "ko-kiwi", "ko-bigram"]),
    "CMRC 2018 dev": ("multilingual/cmrc2018-dev.json", "zh", ["whitespace", "zh-jieba", "zh-bigram"]),
    "DRCD dev": ("multilingual/drcd-dev.json", "zh", ["whitespace", "zh-jieba", "zh-bigram"]),
}
TUNING = {"CMRC 2018 trial": ("multilingual/cmrc2018-trial.json", "zh")}  # fusion settings are chosen here only
KS = (1, 5, 20)
CANDIDATES = 100  # per retriever before fusion, as the English hybrid (retrieval.candidates)
# fusion settings tried on the tuning split: (method, alpha, rrf_k); alpha weighs dense in min-max
FUSION_GRID = [("rrf", 0.5, k) for k in (10, 30, 60, 100)] + [("minmax", a / 10, 60) for a in range(1, 10)]
SEED = 13


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


class PrefixedDense:
    """Exact inner-product search over passage vectors; questions go through the encoder's encode_queries (its
    query prompt, "query: " for e5), as the dense index's search does."""

    name = "dense"

    def __init__(self, encoder, store, vectors):
        self.encoder, self.store, self.vectors = encoder, store, vectors

    def search(self, questions, k):
        import numpy as np

        from odqa.core.types import SearchHit

        queries = self.encoder.encode_queries(list(questions), batch_size=64)
        scores = queries @ self.vectors.T
        top = np.argsort(-scores, axis=1, kind="stable")[:, :k]
        results = [
            [SearchHit(row=int(r), score=float(s[r]), source=self.name) for r in row] for row, s in zip(top, scores)
        ]
        for hits in results:
            for hit in hits:
                hit.passage = self.store.get(hit.row)
        return results


class CachedLists:
    """A retriever's `CANDIDATES`-deep list per question, computed once and sliced after, so that each fusion
    setting reads the same lists (and the dense encoder runs once per question)."""

    def __init__(self, retriever, size: int, depth: int = CANDIDATES):
        self.retriever, self.size, self.depth, self.lists = retriever, size, depth, {}
        self.name = retriever.name

    def search(self, questions, k):
        missing = [q for q in dict.fromkeys(questions) if q not in self.lists]
        if missing:
            depth = min(max(k, self.depth), self.size)
            self.lists.update(zip(missing, self.retriever.search(missing, depth)))
        return [self.lists[q][:k] for q in questions]


class Fused:
    """The hybrid's fusion (odqa.core.fusion) of two CachedLists, each `CANDIDATES` deep."""

    name = "hybrid"

    def __init__(self, dense: CachedLists, sparse: CachedLists, method: str, alpha: float, rrf_k: int):
        from odqa.core.fusion import Fusion

        self.dense, self.sparse, self.fusion = dense, sparse, Fusion.hybrid(method, alpha, rrf_k)

    def search(self, questions, k):
        depth = max(k, CANDIDATES)
        return [
            self.fusion([d, s], k)
            for d, s in zip(self.dense.search(questions, depth), self.sparse.search(questions, depth))
        ]


def bm25_of(bundle):
    """The BM25 retriever over an index folder, as the pipeline builds it (retriever.registry)."""
    from odqa.retriever.registry import RetrieverRuntime, build_retriever
    from odqa.retriever.settings import RetrievalConfig

    return build_retriever(bundle, RetrievalConfig(), RetrieverRuntime(), "bm25")


def passage_vectors(encoder, store, path: Path, batch_size: int):
    """Passage vectors through encode_passages (the encoder's passage prompt, "passage: " for e5), cached."""
    import numpy as np

    from odqa.core.encoder import passage_text

    if path.exists():
        return np.load(path)
    rows = store.dataset[:]
    texts = [passage_text(t, x) for t, x in zip(rows["title"], rows["text"])]
    start = time.perf_counter()
    vectors = encoder.encode_passages(texts, batch_size=batch_size, progress="passages")
    log(f"encoded {len(texts)} passages in {time.perf_counter() - start:.0f} s")
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, vectors)
    return vectors


def fusion_label(method: str, alpha: float, rrf_k: int) -> str:
    return f"RRF k={rrf_k}" if method == "rrf" else f"min-max alpha={alpha:.1f}"


def bm25_bundle(path: Path, language: str, analyzer: str, cache: Path):
    from odqa.indexes.folder import FolderIndex
    from odqa.indexing import IndexSpec, build_index

    out = cache / f"bm25-{analyzer}"
    if not (out / "manifest.json").exists():
        build_index(IndexSpec(corpus=str(path), out=str(out), backends=["bm25"], language=language, analyzer=analyzer))
    return FolderIndex.open(out)


def questions_of(path: Path) -> tuple[list, int]:
    """The file's questions and how many were dropped: CMRC 2018 trial has one empty question, which
    load_questions rightly refuses; the bench asks the others (from a filtered copy in a temporary folder)."""
    import tempfile

    from odqa.corpus.questions import load_questions

    data = json.loads(path.read_text(encoding="utf-8"))
    dropped = 0
    for article in data["data"]:
        for paragraph in article["paragraphs"]:
            kept = [qa for qa in paragraph["qas"] if isinstance(qa.get("question"), str) and qa["question"].strip()]
            dropped += len(paragraph["qas"]) - len(kept)
            paragraph["qas"] = kept
    if not dropped:
        return load_questions(path), 0
    with tempfile.TemporaryDirectory() as folder:
        copy = Path(folder) / path.name
        copy.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
        return load_questions(copy), dropped


def choose_fusion(args, encoder) -> tuple[tuple[str, float, int], list]:
    """The fusion setting with the best R@1 + R@5 on the tuning split (ties: the earlier in FUSION_GRID)."""
    from odqa.eval.retrieval import evaluate_retrieval
    from odqa.indexes.analysis import DEFAULT_ANALYZER

    rows = []
    for name, (relative, language) in TUNING.items():
        path = Path(args.data) / relative
        items, dropped = questions_of(path)
        if dropped:
            name = f"{name} ({dropped} empty question{'s' * (dropped > 1)} left out)"
        bundle = bm25_bundle(path, language, DEFAULT_ANALYZER[language], Path(args.cache) / path.stem)
        vectors = passage_vectors(encoder, bundle.store, Path(args.cache) / path.stem / "e5-passages.npy", 32)
        dense = CachedLists(PrefixedDense(encoder, bundle.store, vectors), len(bundle))
        sparse = CachedLists(bm25_of(bundle), len(bundle))
        for method, alpha, rrf_k in FUSION_GRID:
            hybrid = Fused(dense, sparse, method, alpha, rrf_k)
            m = evaluate_retrieval(hybrid, items, KS, progress=False)
            rows.append((name, len(items), (method, alpha, rrf_k), m))
            log(f"tuning {name} {fusion_label(method, alpha, rrf_k)}: R@1 {m['recall@1']:.2f} R@5 {m['recall@5']:.2f}")
    best = max(rows, key=lambda r: r[3]["recall@1"] + r[3]["recall@5"])  # max keeps the first of equals
    return best[2], rows


def write_table(results: dict, tuning: list, chosen, args, argv) -> None:
    lines = [
        "## Korean and Chinese: each dev set's own paragraphs as the corpus",
        "",
        "Recall@k: a top-k passage holds an answer (substring match for CJK answers); gold: a top-k passage "
        "is cut from the question's own paragraph. Dense: multilingual e5 (models/encoder-multilingual) with "
        'its "query: " / "passage: " prompts, exact inner product. Hybrids: odqa.core.fusion over 100 '
        "candidates of dense and of BM25 with the language's default analyser; the fused rows read the two "
        "lists cached from the rows above them, so they have no speed of their own (about the two summed).",
        "",
    ]
    for name, result in results.items():
        lines += [
            f"### {name}: {result['passages']} passages, {result['questions']} questions",
            "",
            "| retriever | "
            + " | ".join(f"R@{k}" for k in KS)
            + " | "
            + " | ".join(f"gold R@{k}" for k in KS)
            + " | MRR | q/s |",
            "|---|" + "---|" * (2 * len(KS) + 2),
        ]
        for label, m in result["rows"].items():
            speed = f"{m['questions_per_second']:.1f}" if not label.startswith("hybrid") else "-"
            lines.append(
                f"| {label} | "
                + " | ".join(f"{m[f'recall@{k}']:.2f}" for k in KS)
                + " | "
                + " | ".join(f"{m.get(f'gold_recall@{k}', float('nan')):.2f}" for k in KS)
                + f" | {m['mrr']:.2f} | {speed} |"
            )
        lines.append("")
    if tuning:
        name, count = tuning[0][0], tuning[0][1]
        lines += [
            f"Fusion setting chosen on {name} ({count} questions over its own paragraphs, BM25 with the "
            f"language's default analyser + dense), best R@1 + R@5; never on a dev set: "
            f"**{fusion_label(*chosen)}**.",
            "",
            "| fusion | R@1 | R@5 | R@20 | MRR |",
            "|---|---|---|---|---|",
        ]
        for _, _, setting, m in tuning:
            lines.append(
                f"| {fusion_label(*setting)} | {m['recall@1']:.2f} | {m['recall@5']:.2f} | "
                f"{m['recall@20']:.2f} | {m['mrr']:.2f} |"
            )
        lines.append("")
    from odqa.core.device import FAST_BF16_FLAGS, cpu_model_and_flags

    model, flags = cpu_model_and_flags(("avx2", "avx512f", "avx512_vnni", *FAST_BF16_FLAGS))
    lines.append(
        f"Machine: {model}, {os.cpu_count()} cores, flags {' '.join(flags)}; Python "
        f"{platform.python_version()}; load average {os.getloadavg()[0]:.1f} (shared with other jobs: q/s "
        f"indicative only). Command: `python bench/retrieval_cjk.py {' '.join(argv or sys.argv[1:])}`"
    )
    table = "\n".join(lines) + "\n"
    print(table, file=sys.stderr)
    if args.out:
        Path(args.out).write_text(table, encoding="utf-8")
        Path(args.out).with_suffix(".json").write_text(
            json.dumps(
                {
                    "datasets": results,
                    "tuning": [{"split": n, "fusion": fusion_label(*st), "metrics": m} for n, _, st, m in tuning],
                    "chosen": fusion_label(*chosen) if chosen else None,
                },
                indent=1,
                ensure_ascii=False,
            )
        )


def main(argv=None) -> int:
    from odqa.core.runtime import INFERENCE, RUNTIMES

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(ROOT.parent / "shared" / "data"))
    parser.add_argument("--encoder", default="models/encoder-multilingual", help="multilingual e5 folder")
    parser.add_argument("--max-length", type=int, default=512)
    parser.add_argument(
        "--runtime",
        default=INFERENCE.runtime,
        choices=RUNTIMES,
        help="encoder runtime, fp32 either way (onnx: same vectors, faster on CPU)",
    )
    parser.add_argument("--questions", type=int, help="N questions of each set sampled with seed 13 (default: all)")
    parser.add_argument("--datasets", nargs="*", default=list(DATASETS), choices=list(DATASETS))
    parser.add_argument("--no-dense", action="store_true", help="BM25 analysers only")
    parser.add_argument("--no-tune", action="store_true", help="skip choosing the fusion setting on the tuning split")
    parser.add_argument(
        "--encode-only",
        action="store_true",
        help="only encode (and cache) the passage vectors of --datasets and the tuning split",
    )
    parser.add_argument("--default-analyzer-only", action="store_true", help="BM25 with each language's default only")
    parser.add_argument("--cache", default="work_indexes/bench/cjk")
    parser.add_argument("--out", help="write the Markdown table here")
    args = parser.parse_args(argv)

    from odqa.corpus.questions import load_questions
    from odqa.eval.retrieval import evaluate_retrieval
    from odqa.indexes.analysis import DEFAULT_ANALYZER

    encoder = None
    if not args.no_dense:
        from odqa.core.encoder import TextEncoder

        encoder = TextEncoder.from_pretrained(
            args.encoder, max_length=args.max_length, device="cpu", precision="fp32", runtime=args.runtime
        )
    if args.encode_only:
        sets = [DATASETS[name][:2] for name in args.datasets] + ([] if args.no_tune else list(TUNING.values()))
        for relative, language in sets:
            path = Path(args.data) / relative
            bundle = bm25_bundle(path, language, DEFAULT_ANALYZER[language], Path(args.cache) / path.stem)
            passage_vectors(encoder, bundle.store, Path(args.cache) / path.stem / "e5-passages.npy", 32)
        return 0
    chosen, tuning = (None, [])
    if encoder is not None and not args.no_tune:
        chosen, tuning = choose_fusion(args, encoder)
        log(f"fusion chosen on the tuning split: {fusion_label(*chosen)}")
    results: dict[str, dict] = {}
    for name in args.datasets:
        relative, language, analyzers = DATASETS[name]
        default = DEFAULT_ANALYZER[language]
        if args.default_analyzer_only:
            analyzers = [default]
        path = Path(args.data) / relative
        items = load_questions(path)
        if args.questions and args.questions < len(items):
            items = random.Random(SEED).sample(items, args.questions)
        cache = Path(args.cache) / path.stem
        rows = {}
        bundles = {}
        for analyzer in dict.fromkeys([*analyzers, default] if encoder is not None else analyzers):
            bundles[analyzer] = bm25_bundle(path, language, analyzer, cache)
        sparse = CachedLists(bm25_of(bundles[default]), len(bundles[default]))
        for analyzer in analyzers:
            bm25 = sparse if analyzer == default else bm25_of(bundles[analyzer])
            rows[f"BM25 {analyzer}"] = evaluate_retrieval(bm25, items, KS, progress=False)
            log(f"{name} BM25 {analyzer}: {rows[f'BM25 {analyzer}']}")
        if encoder is not None:
            store = bundles[default].store
            vectors = passage_vectors(encoder, store, cache / "e5-passages.npy", 32)
            dense = CachedLists(PrefixedDense(encoder, store, vectors), len(store))
            rows["dense e5"] = evaluate_retrieval(dense, items, KS, progress=False)
            log(f"{name} dense: {rows['dense e5']}")
            settings = [("rrf", 0.5, 60), ("minmax", 0.5, 60)]
            for method, alpha, rrf_k in settings + ([chosen] if chosen and chosen not in settings else []):
                hybrid = Fused(dense, sparse, method, alpha, rrf_k)
                label = f"hybrid {fusion_label(method, alpha, rrf_k)} (e5 + BM25 {default})"
                if (method, alpha, rrf_k) == chosen:
                    label += ", chosen on the tuning split"
                rows[label] = evaluate_retrieval(hybrid, items, KS, progress=False)
                log(f"{name} {label}: {rows[label]}")
        results[name] = {"passages": len(bundles[analyzers[0]].store), "questions": len(items), "rows": rows}

        write_table(results, tuning, chosen, args, argv)  # after each set, so a cut-off run keeps what it measured
    return 0


if __name__ == "__main__":
    sys.exit(main())
