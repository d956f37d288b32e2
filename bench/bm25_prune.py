"""What dropping a question's most frequent terms from its BM25 query costs in recall and saves in time.

BM25's time grows with the posting lists of the question's terms, and the frequent ones hold most postings for
little weight (bench/results/scale.md). This script searches one BM25 index (Tantivy) for each question with every
term, then with the terms whose document frequency is above a fraction of the passages left out (at least the
rarest term kept), and reports recall@k against the answers and Tantivy's search time (CPU, top 100), side by side.

    python bench/bm25_prune.py --index $ODQA_HOME/work_indexes/wiki --questions 1000 --max-df 0 0.1 0.05 0.02
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scale import Timer  # noqa: E402  (bench/ is the script's folder)


def pruned_query(index, terms: list[str], max_df: float):
    """An OR of `terms` without those in more than `max_df` of the passages (`TantivyIndex.drop_frequent_terms`, what
    `[retrieval] bm25_max_df` does). Returns (query, terms kept)."""
    kept = index.drop_frequent_terms(terms, max_df)
    return index.terms_query(kept), kept


def main(argv=None) -> int:
    from odqa.core.answers import has_answer
    from odqa.core.device import cpu_description
    from odqa.corpus.questions import load_questions
    from odqa.corpus.store import PassageStore
    from odqa.indexes.bm25 import clean_query, load_text_index

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--index", required=True, help="an index folder with bm25/ (Tantivy) and passages/")
    parser.add_argument("--data", default=str(ROOT.parent / "shared" / "data"))
    parser.add_argument(
        "--questions-file",
        default="dpr-qas/nq-test.qa.tsv",
        help="under --data (NQ test: held out from every odqa model)",
    )
    parser.add_argument("--questions", type=int, default=1000, help="the first N questions (0: all)")
    parser.add_argument("--max-df", type=float, nargs="+", default=[0.0, 0.1, 0.05, 0.02])
    parser.add_argument("--k", type=int, nargs="+", default=[20, 100])
    parser.add_argument("--out", default="")
    args = parser.parse_args(argv)

    folder = Path(args.index)
    if not (folder / "bm25" / "manifest.json").exists():
        print(
            f"error: no BM25 index in {folder}/bm25; build one with `python run_qa.py index --corpus "
            f"../shared/data/wiki --out {folder} --backends bm25`",
            file=sys.stderr,
        )
        return 2
    index = load_text_index(folder / "bm25")
    if not hasattr(index, "searcher") or index.analyze is not None:
        print("error: this benchmark reads an English Tantivy index (the default engine)", file=sys.stderr)
        return 2
    store = PassageStore.open(folder / "passages")
    items = load_questions(Path(args.data) / args.questions_file, limit=args.questions or None)
    depth = max(max(args.k), 100)
    runs = {m: {"found": dict.fromkeys(args.k, 0), "timer": Timer(), "terms": 0} for m in args.max_df}
    total_terms = 0
    for item in items:
        text = clean_query(item.question)
        terms = index.analyzer.analyze(text) if text else []
        total_terms += len(terms)
        if not terms:
            continue
        for max_df in args.max_df:  # alternating variants per question: the same cache state for each
            query, kept = pruned_query(index, terms, max_df)
            with runs[max_df]["timer"]:
                result = index.searcher.search(query, depth, count=False)
            runs[max_df]["terms"] += len(kept)
            rows = index._rows(result)
            texts = [p.text for p in store.get_rows([row for row, _ in rows[: max(args.k)]])]
            for k in args.k:
                if any(has_answer(t, item.answers) for t in texts[:k]):
                    runs[max_df]["found"][k] += 1

    n = len(items)
    head = "| max df | terms kept | " + " | ".join(f"R@{k}" for k in args.k) + " | Tantivy top 100, CPU ms p50 / p99 |"
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for max_df, run in runs.items():
        cpu = run["timer"].summary() if run["timer"].cpu else {"cpu_p50_ms": 0.0, "cpu_p99_ms": 0.0}
        lines.append(
            f"| {max_df if max_df else 'off (every term)'} | {run['terms'] / max(total_terms, 1):.3f} | "
            + " | ".join(f"{100 * run['found'][k] / n:.2f}" for k in args.k)
            + f" | {cpu['cpu_p50_ms']:.2f} / {cpu['cpu_p99_ms']:.2f} |"
        )
    text = (
        f"# BM25 with its most frequent question terms dropped\n\nWritten by `python bench/bm25_prune.py "
        f"{' '.join(argv if argv is not None else sys.argv[1:])}` ({time.strftime('%Y-%m-%d')}; {cpu_description()}; "
        f"{index.num_docs():,} passages; {n} questions of {args.questions_file}).\n\n" + "\n".join(lines) + "\n"
    )
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    print(json.dumps({str(m): r["found"] for m, r in runs.items()}), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
