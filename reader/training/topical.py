"""Topical no-answer examples for the reader: a SQuAD question paired with another paragraph of its own article.

Distant negatives (retrieved passages without the answer) teach the null score to reject passages that share
words with the question; topical negatives teach it to reject passages on the question's own subject that do
not say the answer, which is what an open-domain reader sees most among its top passages. A paragraph that
contains any reference answer of the question (case-insensitive) is never used as its negative.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from odqa.core.atomic import atomic_file
from odqa.core.errors import DataFormatError


def topical_negatives(squad: dict, ratio: float, seed: int = 42) -> dict:
    """SQuAD v2.0-format data holding, for a `ratio` share of the questions of `squad`, the question paired
    with another paragraph of the same article (`is_impossible`). Deterministic for a seed."""
    if not 0.0 <= ratio <= 1.0:
        raise DataFormatError(f"ratio must be between 0 and 1, got {ratio}")
    rng = random.Random(seed)
    articles_out = []
    for a_index, article in enumerate(squad.get("data", [])):
        paragraphs = article.get("paragraphs", [])
        if len(paragraphs) < 2:
            continue
        extra: dict[int, list[dict]] = {}
        for p_index, paragraph in enumerate(paragraphs):
            for qa in paragraph.get("qas", []):
                if rng.random() >= ratio:
                    continue
                answers = [a["text"].lower() for a in qa.get("answers", []) if a.get("text", "").strip()]
                others = [i for i in range(len(paragraphs)) if i != p_index]
                rng.shuffle(others)
                for other in others[:5]:
                    context = paragraphs[other]["context"].lower()
                    if not any(ans in context for ans in answers):
                        extra.setdefault(other, []).append(
                            {
                                "id": f"{qa.get('id', '')}#neg{a_index}.{other}",
                                "question": qa["question"],
                                "answers": [],
                                "is_impossible": True,
                            }
                        )
                        break
        if extra:
            articles_out.append(
                {
                    "title": article.get("title", ""),
                    "paragraphs": [
                        {"context": paragraphs[i]["context"], "qas": qas} for i, qas in sorted(extra.items())
                    ],
                }
            )
    return {"version": "v2.0", "data": articles_out}


def write_topical_negatives(squad_path: str | Path, output: str | Path, ratio: float, seed: int = 42) -> dict:
    path = Path(squad_path)
    try:
        squad = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataFormatError(f"{path}: cannot read SQuAD JSON: {exc}") from exc
    if not isinstance(squad, dict) or not isinstance(squad.get("data"), list):
        raise DataFormatError(f"{path}: not SQuAD-format JSON (expected {{'data': [...]}})")
    data = topical_negatives(squad, ratio, seed)
    with atomic_file(Path(output)) as tmp:
        tmp.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    questions = sum(len(p["qas"]) for a in data["data"] for p in a["paragraphs"])
    return {"negatives": questions, "articles": len(data["data"]), "output": str(output)}
