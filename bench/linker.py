#!/usr/bin/env python3
"""Entity-linking benchmark: the ELQ linker against the spaCy NER + alias-table baseline, and entity-guided
retrieval (BM25 with and without the linked entities' passages) on WebQuestions and NQ test.

    python bench/linker.py --kb work_indexes/kb --index work_indexes/wiki --threads 2 [--json out.json]
    python bench/linker.py --kb work_indexes/kb --skip-retrieval --precisions fp32,int8   # int8 beside fp32

Test set: QALD 1-4 gold mentions (never trained on). Dev: the held-out 10% of LC-QuAD (every 10th id).
The entity bonus for guided retrieval is chosen on WebQuestions val and reported on WebQuestions devtest and NQ test.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DATA = ROOT.parent / "shared" / "data"


def linking_table(linkers: dict, kb) -> dict:
    from odqa.eval.evaluators import LinkingEvaluator
    from odqa.eval.linking import load_eval_examples

    sets = {
        "QALD 1-4 (test)": ([DATA / "el" / "qald" / f"qald-{i}.mentions.json" for i in range(1, 5)], "all"),
        "LC-QuAD dev (10%)": ([DATA / "el" / "lcquad1-train.json"], "dev"),
    }
    results = {}
    for set_name, (paths, split) in sets.items():
        evaluator = LinkingEvaluator(load_eval_examples(paths, kb, split), speed=True, n_single=100, n_batch=256)
        for name, linker in linkers.items():
            results[f"{set_name} | {name}"] = evaluator(linker)
    return results


def print_linking(results: dict) -> None:
    print(
        "| set | linker | strong F1 | weak F1 | strong F1 in-KB | weak F1 in-KB | weak P/R in-KB | weak F1 in-KB "
        "lenient | ms/q batch 1 | q/s batch 64 |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for key, m in results.items():
        set_name, name = key.split(" | ")
        print(
            f"| {set_name} | {name} | {m['strong_f1']:.3f} | {m['weak_f1']:.3f} | {m['strong_f1_in_kb']:.3f} | "
            f"{m['weak_f1_in_kb']:.3f} | {m['weak_precision_in_kb']:.3f}/{m['weak_recall_in_kb']:.3f} | "
            f"{m['weak_f1_in_kb_lenient']:.3f} | "
            f"{m['ms_per_question_batch1']:.1f} | {m['questions_per_second_batch64']:.0f} |"
        )


def guided_retrieval(elq, kb, index: Path, bonuses=(0.25, 0.5, 1.0, 2.0), per_entity: int = 3) -> dict:
    import torch

    from odqa.core.answers import has_answer
    from odqa.corpus.questions import load_questions
    from odqa.indexes.folder import FolderIndex
    from odqa.linker.guided import EntityPassages, entity_hits, fuse_entity_hits
    from odqa.retriever.registry import RetrieverRuntime, build_retriever
    from odqa.retriever.settings import RetrievalConfig

    bundle = FolderIndex.open(index)
    bm25 = build_retriever(bundle, RetrievalConfig(), RetrieverRuntime(), "bm25")
    passages = EntityPassages(bundle.store)
    out = {}
    cached = {}
    splits = {
        "val": DATA / "webquestions" / "val.json",
        "devtest": DATA / "webquestions" / "devtest.json",
        "nq-test": DATA / "dpr-qas" / "nq-test.qa.tsv",
    }
    for split, path in splits.items():
        items = load_questions(path)
        questions = [q.question for q in items]
        t = time.time()
        hits = bm25.search(questions, 100)
        with torch.inference_mode():
            mentions = elq.link(questions)
        extra = [entity_hits(q, ms, passages, per_entity=per_entity) for q, ms in zip(questions, mentions)]
        cached[split] = (items, hits, extra)
        out[f"{split}_linked_questions"] = sum(bool(m) for m in mentions) / len(items)
        out[f"{split}_seconds"] = round(time.time() - t)

    def recall(items, lists, k):
        return sum(any(has_answer(h.passage.text, it.answers) for h in hs[:k]) for it, hs in zip(items, lists)) / len(
            items
        )

    items, hits, extra = cached["val"]
    best = max(
        bonuses, key=lambda b: (recall(items, [fuse_entity_hits(h, e, b, 100) for h, e in zip(hits, extra)], 20), -b)
    )
    out["entity_bonus"] = best
    for split, (items, hits, extra) in cached.items():
        fused = [fuse_entity_hits(h, e, best, 100) for h, e in zip(hits, extra)]
        out[split] = {
            "questions": len(items),
            "bm25_recall@20": round(recall(items, hits, 20), 4),
            "bm25_recall@100": round(recall(items, hits, 100), 4),
            "bm25+entities_recall@20": round(recall(items, fused, 20), 4),
            "bm25+entities_recall@100": round(recall(items, fused, 100), 4),
        }
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="linker")
    parser.add_argument("--kb", default=str(ROOT / "work_indexes" / "kb"))
    parser.add_argument("--index", default=str(ROOT / "work_indexes" / "wiki"))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--skip-retrieval", action="store_true")
    parser.add_argument(
        "--precisions",
        default="auto",
        help="comma-separated precisions of the ELQ linker to compare, e.g. fp32,int8 (default auto)",
    )
    parser.add_argument("--json", help="write all numbers to this JSON file")
    args = parser.parse_args(argv)

    import torch

    from odqa.linker.baseline import SpacyAliasLinker
    from odqa.linker.kb import KnowledgeBase
    from odqa.linker.linker import Linker

    torch.set_num_threads(args.threads)
    kb = KnowledgeBase.load(args.kb)
    precisions = [p.strip() for p in args.precisions.split(",") if p.strip()]
    linkers = {}
    for precision in precisions:
        linker = Linker.from_pretrained(args.model, kb=kb, precision=precision)
        linkers["ELQ" if precisions == ["auto"] else f"ELQ {precision} ({linker.plan.label})"] = linker
    elq = next(iter(linkers.values()))  # entity-guided retrieval: the first
    linkers["spaCy + alias"] = SpacyAliasLinker(kb)
    report = {
        "threads": args.threads,
        "mention_threshold": elq.mention_threshold,
        "entity_threshold": elq.entity_threshold,
    }
    report["linking"] = linking_table(linkers, kb)
    print_linking(report["linking"])
    if not args.skip_retrieval:
        if (Path(args.index) / "manifest.json").is_file():
            report["guided_retrieval"] = guided_retrieval(elq, kb, Path(args.index))
            g = report["guided_retrieval"]
            print(
                f"\nEntity-guided retrieval (BM25 over {args.index}; "
                f"bonus {g['entity_bonus']} chosen on WebQuestions val)"
            )
            print("| split | questions | BM25 R@20 | +entities R@20 | BM25 R@100 | +entities R@100 |")
            print("|---|---|---|---|---|---|")
            for split in ("val", "devtest", "nq-test"):
                r = g[split]
                print(
                    f"| {split} | {r['questions']} | {r['bm25_recall@20']:.3f} | {r['bm25+entities_recall@20']:.3f} | "
                    f"{r['bm25_recall@100']:.3f} | {r['bm25+entities_recall@100']:.3f} |"
                )
        else:
            print(f"\n(no index at {args.index}: entity-guided retrieval skipped)")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
