#!/usr/bin/env python
"""Korean and Chinese retrieval over each dev set's own paragraphs (issue #27), as squad-open does for English.

    python bench/retrieval_cjk.py --encoder models/encoder-multilingual --out bench/results/retrieval-cjk.md

For KorQuAD 1.0 dev (ko), CMRC 2018 dev (zh, Simplified) and DRCD dev (zh, Traditional): every paragraph of
the file is indexed (`odqa.indexing.build_index`, one BM25 index per analyser), and every question of the
file is asked. BM25 with each analyser of indexes/analysis.py (whitespace tokens as the baseline), dense
(multilingual e5 with its "query: " / "passage: " prefixes, exact inner product) and hybrid (RRF, k=60, 100
candidates each) of the language's default analyser with dense. Recall@k: a top-k passage holds an answer
(odqa.eval.answers: substring match for CJK answers); gold recall@k: a top-k passage is cut from the
question's own paragraph. Indexes and passage vectors are cached under `--cache`.
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
KS = (1, 5, 20)
SEED = 13


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def cpu_flags() -> list[str]:
    from odqa.core.device import native_bf16_flags

    text = Path("/proc/cpuinfo").read_text()
    flags = {f for line in text.splitlines() if line.startswith("flags") for f in line.split(":", 1)[1].split()}
    return [f for f in ("avx2", "avx512f", "avx512_vnni") if f in flags] + native_bf16_flags(text)


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


class PrefixedDense:
    """Exact inner-product search over passage vectors encoded with e5's passage prefix; questions get the
    query prefix."""

    name = "dense"

    def __init__(self, encoder, store, vectors, query_prefix: str):
        self.encoder, self.store, self.vectors, self.query_prefix = encoder, store, vectors, query_prefix

    def search(self, questions, k):
        import numpy as np

        from odqa.core.types import SearchHit
        from retriever.base import attach_passages

        queries = self.encoder.encode([self.query_prefix + q for q in questions], batch_size=64)
        scores = queries @ self.vectors.T
        top = np.argsort(-scores, axis=1, kind="stable")[:, :k]
        results = [[SearchHit(row=int(r), score=float(s[r]), source=self.name) for r in row] for row, s in zip(top, scores)]
        return attach_passages(self.store, results)


def passage_vectors(encoder, store, path: Path, prefix: str, batch_size: int):
    import numpy as np

    from odqa.core.encoder import passage_text

    if path.exists():
        return np.load(path)
    rows = store.dataset[:]
    texts = [prefix + passage_text(t, x) for t, x in zip(rows["title"], rows["text"])]
    start = time.perf_counter()
    vectors = encoder.encode(texts, batch_size=batch_size, progress="passages")
    log(f"encoded {len(texts)} passages in {time.perf_counter() - start:.0f} s")
    np.save(path, vectors)
    return vectors


def write_table(results: dict, args, argv) -> None:
    lines = ["## Korean and Chinese: each dev set's own paragraphs as the corpus", "",
             "Recall@k: a top-k passage holds an answer (substring match for CJK answers); gold: a top-k passage "
             "is cut from the question's own paragraph.", ""]
    for name, result in results.items():
        lines += [f"### {name}: {result['passages']} passages, {result['questions']} questions", "",
                  "| retriever | " + " | ".join(f"R@{k}" for k in KS) + " | " + " | ".join(f"gold R@{k}" for k in KS)
                  + " | MRR | q/s |",
                  "|---|" + "---|" * (2 * len(KS) + 2)]
        for label, m in result["rows"].items():
            lines.append(f"| {label} | " + " | ".join(f"{m[f'recall@{k}']:.2f}" for k in KS) + " | "
                         + " | ".join(f"{m.get(f'gold_recall@{k}', float('nan')):.2f}" for k in KS)
                         + f" | {m['mrr']:.4f} | {m['questions_per_second']:.1f} |")
        lines.append("")
    lines.append(f"Machine: {cpu_model()}, {os.cpu_count()} cores, flags {' '.join(cpu_flags())}; Python "
                 f"{platform.python_version()}; load average {os.getloadavg()[0]:.1f} (shared with other jobs: q/s "
                 f"indicative only). Command: `python bench/retrieval_cjk.py {' '.join(argv or sys.argv[1:])}`")
    table = "\n".join(lines) + "\n"
    print(table, file=sys.stderr)
    if args.out:
        Path(args.out).write_text(table, encoding="utf-8")
        Path(args.out).with_suffix(".json").write_text(json.dumps(results, indent=1, ensure_ascii=False))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(ROOT.parent / "shared" / "data"))
    parser.add_argument("--encoder", default="models/encoder-multilingual", help="multilingual e5 folder")
    parser.add_argument("--max-length", type=int, default=512)
    parser.add_argument("--questions", type=int, help="N questions of each set sampled with seed 13 (default: all)")
    parser.add_argument("--datasets", nargs="*", default=list(DATASETS), choices=list(DATASETS))
    parser.add_argument("--no-dense", action="store_true", help="BM25 analysers only")
    parser.add_argument("--default-analyzer-only", action="store_true", help="BM25 with each language's default only")
    parser.add_argument("--cache", default="work_indexes/bench/cjk")
    parser.add_argument("--out", help="write the Markdown table here")
    args = parser.parse_args(argv)

    from odqa.corpus.questions import load_questions
    from odqa.eval.retrieval import evaluate_retrieval
    from odqa.indexing import IndexSpec, build_index
    from retriever.hybrid import HybridRetriever
    from retriever.loading import IndexBundle

    encoder = None
    if not args.no_dense:
        from odqa.core.encoder import TextEncoder

        encoder = TextEncoder.from_pretrained(args.encoder, max_length=args.max_length, device="cpu")
    results: dict[str, dict] = {}
    for name in args.datasets:
        relative, language, analyzers = DATASETS[name]
        if args.default_analyzer_only:
            from indexes.analysis import DEFAULT_ANALYZER

            analyzers = [DEFAULT_ANALYZER[language]]
        path = Path(args.data) / relative
        items = load_questions(path)
        if args.questions and args.questions < len(items):
            items = random.Random(SEED).sample(items, args.questions)
        cache = Path(args.cache) / path.stem
        rows = {}
        bundles = {}
        for analyzer in analyzers:
            out = cache / f"bm25-{analyzer}"
            if not (out / "manifest.json").exists():
                build_index(IndexSpec(corpus=str(path), out=str(out), backends=["bm25"], language=language,
                                      analyzer=analyzer))
            bundles[analyzer] = IndexBundle.open(out)
            rows[f"BM25 {analyzer}"] = evaluate_retrieval(bundles[analyzer].bm25(), items, KS, progress=False)
            log(f"{name} BM25 {analyzer}: {rows[f'BM25 {analyzer}']}")
        if encoder is not None:
            from indexes.analysis import DEFAULT_ANALYZER

            default = DEFAULT_ANALYZER[language]
            store = bundles[default].store
            vectors = passage_vectors(encoder, store, cache / "e5-passages.npy", "passage: ", 32)
            dense = PrefixedDense(encoder, store, vectors, "query: ")
            rows["dense e5"] = evaluate_retrieval(dense, items, KS, progress=False)
            log(f"{name} dense: {rows['dense e5']}")
            hybrid = HybridRetriever(dense, bundles[default].bm25(), method="rrf", candidates=100)
            rows[f"hybrid RRF (e5 + BM25 {default})"] = evaluate_retrieval(hybrid, items, KS, progress=False)
        results[name] = {"passages": len(bundles[analyzers[0]].store), "questions": len(items), "rows": rows}

        write_table(results, args, argv)  # after each set, so a cut-off run keeps what it measured
    return 0


if __name__ == "__main__":
    sys.exit(main())
