"""open-dev: a fixed dev split of open-domain questions that no odqa model is trained or calibrated on.

Readers and retrievers are chosen on it (`bench/qa.py --suite open-dev`), so it must never leak into training:
`build-reader-data`, `build-dpr-data`, `train-reader` and `fit-calibration` skip its questions wherever they
appear (matched by the normalised question text, so another file holding the same questions is caught too).

The split is drawn once with a fixed seed from the question sets under the shared data folder and listed in
`open_dev.json` beside this module (ids and a short digest of each normalised question);
`python -m odqa.corpus.open_dev --data DATA --write` draws it again (the same file for the same data).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
import sys
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from odqa.core.errors import DataFormatError
from odqa.corpus.questions import QAItem, load_questions

SPLIT_FILE = Path(__file__).with_name("open_dev.json")
SEED = 2026


@dataclass(frozen=True)
class Source:
    name: str
    path: str  # relative to the shared data folder
    size: int


SOURCES = (
    Source("triviaqa", "dpr-qas/trivia-dev.qa.tsv", 1500),
    Source("nq", "dpr-qas/nq-dev.qa.tsv", 1500),
    Source("webquestions", "webquestions/val.json", 400),
    Source("curatedtrec", "curatedtrec/curated-train.tsv", 300),
)


def question_key(question: str) -> str:
    """Digest of a question's normalised text (case, accents, punctuation and spacing ignored)."""
    text = unicodedata.normalize("NFKD", question.casefold())
    text = "".join(c for c in text if not unicodedata.combining(c))
    text = " ".join(re.sub(r"[^\w]+", " ", text).split())
    return hashlib.blake2b(text.encode("utf-8"), digest_size=8).hexdigest()


def draw_split(data_dir: str | Path) -> dict:
    """The split's content for the data under `data_dir`: per source, the sampled ids (in file order) and
    question digests."""
    data_dir = Path(data_dir)
    sources: dict[str, dict] = {}
    for source in SOURCES:
        items = load_questions(data_dir / source.path)
        items = [item for item in items if item.answers and any(a.strip() for a in item.answers)]
        rng = random.Random(f"{SEED}:{source.name}")
        picked = sorted(rng.sample(range(len(items)), min(source.size, len(items))))
        sources[source.name] = {
            "file": source.path,
            "questions": len(items),
            "ids": [items[i].id for i in picked],
            "keys": [question_key(items[i].question) for i in picked],
        }
    return {"seed": SEED, "note": "odqa open-dev: never train or calibrate on these questions", "sources": sources}


@lru_cache(maxsize=1)
def split() -> dict:
    try:
        return json.loads(SPLIT_FILE.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise DataFormatError(f"{SPLIT_FILE}: the open-dev split cannot be read ({exc}); reinstall odqa") from exc


@lru_cache(maxsize=1)
def held_out_keys() -> frozenset[str]:
    return frozenset(key for source in split()["sources"].values() for key in source["keys"])


def is_open_dev(question: str) -> bool:
    return question_key(question) in held_out_keys()


def drop_open_dev(items: Iterable[QAItem]) -> tuple[list[QAItem], int]:
    """The items that are not open-dev questions, and how many were dropped."""
    kept, dropped = [], 0
    for item in items:
        if is_open_dev(item.question):
            dropped += 1
        else:
            kept.append(item)
    return kept, dropped


def open_dev_questions(data_dir: str | Path, sources: Sequence[str] | None = None) -> dict[str, list[QAItem]]:
    """The split's questions per source, read from the question files under `data_dir`; refuses files
    whose questions no longer match the listed digests (another version of a data set)."""
    data_dir = Path(data_dir)
    listed = split()["sources"]
    unknown = set(sources or ()) - set(listed)
    if unknown:
        raise DataFormatError(f"unknown open-dev source(s) {sorted(unknown)}; choose from {sorted(listed)}")
    out: dict[str, list[QAItem]] = {}
    for name, entry in listed.items():
        if sources and name not in sources:
            continue
        by_id = {item.id: item for item in load_questions(data_dir / entry["file"])}
        items = []
        for qid, key in zip(entry["ids"], entry["keys"]):
            item = by_id.get(qid)
            if item is None or question_key(item.question) != key:
                raise DataFormatError(
                    f"{data_dir / entry['file']}: question {qid!r} is not the one open-dev lists; "
                    "this is another version of the file (use the published one)"
                )
            items.append(item)
        out[name] = items
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="the shared data folder (holds dpr-qas/, webquestions/, ...)")
    parser.add_argument("--write", action="store_true", help=f"write the split to {SPLIT_FILE.name}")
    args = parser.parse_args(argv)
    drawn = draw_split(args.data)
    for name, entry in drawn["sources"].items():
        print(f"{name}: {len(entry['ids'])} of {entry['questions']} ({entry['file']})", file=sys.stderr)
    if args.write:
        SPLIT_FILE.write_text(json.dumps(drawn, indent=0) + "\n", encoding="utf-8")
    elif drawn != split():
        print(f"the drawn split differs from {SPLIT_FILE}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
