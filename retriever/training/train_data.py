"""Training data for the dense retriever, in DPR's format.

Building (`build_dpr_data`): for each question with answers, BM25 retrieves the top-k passages of an index;
passages containing an answer (DPR's `has_answer`; a regex search for CuratedTREC) are positives, the others
are hard negatives. A SQuAD question (one that names its gold paragraph) takes that paragraph as its one
positive, and its hard negatives are retrieved passages that neither hold an answer nor come from the gold
paragraph. Questions left without a positive are dropped and counted. Output: JSON Lines, one object per
question, as DPR's training files (`question`, `answers`, `positive_ctxs`, `hard_negative_ctxs`,
`negative_ctxs`; contexts with `title`, `text`, `passage_id`, `score`) plus `id` (`FILE:INDEX`) and `source`.
The build appends one batch at a time and a rerun skips questions already written or dropped (the dropped
keys are kept in `OUTPUT.dropped`), so an interrupted build resumes where it stopped.

Dev split (`dev_fraction`, `dev_dir`): a fixed share of each source's questions (chosen by a hash of the
question's key, so reruns agree) is set aside *before* retrieval, with or without a positive, and written
to `DEV_DIR/<source>.dev.jsonl` (`id`, `question`, `answers`, `regex`). Those questions never reach the
training file, and because the positive filter never saw them they are an unbiased sample of the source:
choosing a hybrid alpha on questions kept only because BM25 found their answer would favour BM25.

Reading (`read_dpr_file`): that JSONL, or DPR's published JSON (a list of such objects, e.g.
biencoder-nq-train.json, whose contexts carry `passage_id` or `psg_id`). Bad rows (not an object, no
question, answers not a list of strings, no usable positive) are skipped, counted and logged with their
line (JSONL) or list index (JSON); a bad context inside a good row is dropped and counted.

Test sets are refused as sources: the project reports on them.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import logging
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tqdm.auto import tqdm

from odqa.core.answers import has_answer
from odqa.core.atomic import atomic_file
from odqa.core.errors import DataFormatError, OdqaError
from odqa.core.inputs import check_input
from odqa.corpus.open_dev import is_open_dev
from odqa.corpus.questions import QAItem, check_not_test_set, load_questions
from odqa.retriever.registry import RetrieverRuntime, build_retriever, open_index
from odqa.retriever.settings import RetrievalConfig

log = logging.getLogger("odqa.retriever.training.train_data")

MAX_LOGGED_SKIPS = 20

# ---------------------------------------------------------------------------------------------------- building


@dataclass
class BuildStats:
    questions: int = 0  # read from the sources (after --limit)
    already_done: int = 0  # skipped because an earlier run wrote or dropped them
    written: int = 0
    dropped_no_positive: int = 0
    dropped_no_answers: int = 0
    dev: int = 0  # set aside for the dev split
    positives: int = 0
    hard_negatives: int = 0
    per_source: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def _context(title: str, text: str, passage_id: str, score: float | None = None) -> dict:
    ctx: dict[str, str | float] = {"title": title, "text": text, "passage_id": passage_id}
    if score is not None:
        ctx["score"] = round(float(score), 4)
    return ctx


def split_hits(
    item: QAItem, hits, max_positives: int = 0, max_hard_negatives: int = 0
) -> tuple[list[dict], list[dict]]:
    """(positive_ctxs, hard_negative_ctxs) for one question from its retrieved hits (0 = keep all)."""
    positives: list[dict] = []
    negatives: list[dict] = []
    if item.context:
        positives.append(_context(item.title, item.context, f"gold:{item.id}"))
    for hit in hits:
        p = hit.passage
        answer = has_answer(p.text, item.answers, regex_answers=item.regex)
        if item.context:
            if answer or p.text in item.context:
                continue  # the gold paragraph (or a copy of it) is the positive; answer-bearing others are ambiguous
            negatives.append(_context(p.title, p.text, p.id, hit.score))
        elif answer:
            positives.append(_context(p.title, p.text, p.id, hit.score))
        else:
            negatives.append(_context(p.title, p.text, p.id, hit.score))
    if max_positives:
        positives = positives[:max_positives]
    if max_hard_negatives:
        negatives = negatives[:max_hard_negatives]
    return positives, negatives


def in_dev_split(key: str, fraction: float) -> bool:
    """Whether the question with this key belongs to the dev split: a stable hash, not a random draw."""
    if fraction <= 0:
        return False
    value = int.from_bytes(hashlib.sha1(key.encode("utf-8")).digest()[:8], "big") / 2**64
    return value < fraction


def dev_file_name(source_name: str) -> str:
    """`nq-dev.qa.tsv` -> `nq-dev.qa.dev.jsonl`: one dev file per source, next to nothing else."""
    stem = source_name
    for suffix in (".gz", ".jsonl", ".json", ".tsv", ".csv"):
        stem = stem.removesuffix(suffix)
    return f"{stem}.dev.jsonl"


def _write_dev_files(dev_dir: Path, rows: dict[str, list[dict]]) -> None:
    dev_dir.mkdir(parents=True, exist_ok=True)
    for name, items in rows.items():
        with atomic_file(dev_dir / dev_file_name(name)) as tmp:
            tmp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in items), encoding="utf-8")


def _done_keys(output: Path) -> set[str]:
    done: set[str] = set()
    if output.exists():
        with output.open(encoding="utf-8") as f:
            for line in f:
                try:
                    done.add(json.loads(line)["id"])
                except (json.JSONDecodeError, KeyError, TypeError):
                    continue  # a line cut by a crash: that question is rebuilt
    dropped = output.with_name(output.name + ".dropped")
    if dropped.exists():
        done.update(x.strip() for x in dropped.read_text(encoding="utf-8").splitlines() if x.strip())
    return done


def _truncate_partial_line(output: Path) -> None:
    """A crash mid-write can leave a last line without its newline; cut it so appends start clean."""
    if not output.exists() or output.stat().st_size == 0:
        return
    data = output.read_bytes()
    if data.endswith(b"\n"):
        return
    cut = data.rfind(b"\n") + 1
    with output.open("r+b") as f:
        f.truncate(cut)


def build_dpr_data(
    sources: Sequence[str | Path],
    index_dir: str | Path,
    output: str | Path,
    k: int,
    limit: int = 0,
    max_positives: int = 0,
    max_hard_negatives: int = 0,
    batch_size: int = 64,
    retriever=None,
    progress: bool = True,
    dev_fraction: float = 0.0,
    dev_dir: str | Path | None = None,
) -> BuildStats:
    """Write (append) DPR-format JSONL for the questions of `sources`; see the module docstring."""
    for src in sources:
        check_not_test_set(src)
    if not 0.0 <= dev_fraction < 1.0:
        raise OdqaError(f"dev_fraction must be in [0, 1), got {dev_fraction}")
    if dev_fraction > 0 and dev_dir is None:
        raise OdqaError("a dev split needs a folder for its files: give dev_dir (--dev-dir)")
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    # BM25 mines the positives and hard negatives, as DPR did
    retriever = retriever or build_retriever(open_index(index_dir, None), RetrievalConfig(), RetrieverRuntime(), "bm25")
    stats = BuildStats()
    done = _done_keys(output)
    _truncate_partial_line(output)
    todo: list[tuple[str, str, QAItem]] = []
    dev_rows: dict[str, list[dict]] = {}
    for src in sources:
        items = load_questions(src, limit=limit or None)
        name = Path(src).name
        counts = stats.per_source.setdefault(
            name, {"questions": len(items), "written": 0, "dropped": 0, "dev": 0, "open_dev_skipped": 0}
        )
        stats.questions += len(items)
        for i, item in enumerate(items):
            if is_open_dev(item.question):
                counts["open_dev_skipped"] += 1
                continue
            key = f"{name}:{i}"
            if in_dev_split(key, dev_fraction):
                if key in done:
                    raise OdqaError(
                        f"{output} already holds {key}, which the dev split sets aside: it was built with "
                        "another --dev-fraction; build into a new --output"
                    )
                stats.dev += 1
                counts["dev"] += 1
                dev_rows.setdefault(name, []).append(
                    {"id": key, "question": item.question, "answers": item.answers, "regex": item.regex}
                )
                continue
            if key in done:
                stats.already_done += 1
                continue
            if not item.answers or not any(a.strip() for a in item.answers):
                stats.dropped_no_answers += 1
                counts["dropped"] += 1
                continue
            todo.append((key, name, item))
    if dev_rows and dev_dir is not None:  # a dev split has its folder (checked above)
        _write_dev_files(Path(dev_dir), dev_rows)
    dropped_path = output.with_name(output.name + ".dropped")
    bar = tqdm(total=len(todo), desc="build-dpr-data", unit=" q", disable=not progress, mininterval=2)
    with output.open("a", encoding="utf-8") as out, dropped_path.open("a", encoding="utf-8") as dropped:
        for lo in range(0, len(todo), batch_size):
            chunk = todo[lo : lo + batch_size]
            results = retriever.search([item.question for _, _, item in chunk], k)
            lines, drops = [], []
            for (key, name, item), hits in zip(chunk, results):
                positives, negatives = split_hits(item, hits, max_positives, max_hard_negatives)
                if not positives:
                    stats.dropped_no_positive += 1
                    stats.per_source[name]["dropped"] += 1
                    drops.append(key + "\n")
                    continue
                stats.written += 1
                stats.positives += len(positives)
                stats.hard_negatives += len(negatives)
                stats.per_source[name]["written"] += 1
                lines.append(
                    json.dumps(
                        {
                            "id": key,
                            "source": name,
                            "question": item.question,
                            "answers": item.answers,
                            "regex": item.regex,
                            "positive_ctxs": positives,
                            "hard_negative_ctxs": negatives,
                            "negative_ctxs": [],
                        },
                        ensure_ascii=False,
                    )
                    + "\n"
                )
            out.write("".join(lines))
            out.flush()
            dropped.write("".join(drops))
            dropped.flush()
            bar.update(len(chunk))
    bar.close()
    return stats


# ---------------------------------------------------------------------------------------------------- reading


@dataclass
class DPRExample:
    question: str
    answers: list[str]
    positives: list[dict]
    hard_negatives: list[dict]
    negatives: list[dict] = field(default_factory=list)
    id: str = ""
    regex: bool = False


@dataclass
class ReadStats:
    rows: int = 0
    kept: int = 0
    skipped: Counter = field(default_factory=Counter)  # reason -> count
    bad_contexts: int = 0
    logged: int = 0

    @property
    def skipped_total(self) -> int:
        return sum(self.skipped.values())

    def to_dict(self) -> dict:
        return {"rows": self.rows, "kept": self.kept, "skipped": dict(self.skipped), "bad_contexts": self.bad_contexts}


def _open_text(path: Path):
    if path.name.endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8")
    return path.open(encoding="utf-8")


def _rows(path: Path) -> Iterator[tuple[str, object]]:
    """(where, row) pairs: `path:LINE` for JSON Lines, `path[INDEX]` for a JSON list."""
    with _open_text(path) as f:
        head = ""
        while True:
            ch = f.read(1)
            if not ch or not ch.isspace():
                head = ch
                break
    if head == "[":  # DPR's published JSON: one list
        with _open_text(path) as f:
            try:
                data = json.load(f)
            except json.JSONDecodeError as exc:
                raise DataFormatError(f"{path}: not valid JSON ({exc})") from exc
        for i, row in enumerate(data):
            yield f"{path}[{i}]", row
        return
    with _open_text(path) as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                row = _BadJSON
            yield f"{path}:{lineno}", row


class _BadJSON:
    pass


def _clean_contexts(ctxs, stats: ReadStats) -> list[dict] | None:
    if ctxs is None:
        return []
    if not isinstance(ctxs, list):
        return None
    out = []
    for c in ctxs:
        if not isinstance(c, dict) or not isinstance(c.get("text"), str) or not c["text"].strip():
            stats.bad_contexts += 1
            continue
        title = c.get("title") or ""
        if not isinstance(title, str):
            title = str(title)
        pid = c.get("passage_id", c.get("psg_id", c.get("id", "")))
        out.append({"title": title, "text": c["text"], "passage_id": "" if pid is None else str(pid)})
    return out


def parse_row(row, stats: ReadStats) -> DPRExample | str:
    """A DPRExample, or the reason the row is skipped."""
    if row is _BadJSON:
        return "invalid JSON"
    if not isinstance(row, dict):
        return "not a JSON object"
    question = row.get("question")
    if not isinstance(question, str) or not question.strip():
        return "missing question"
    answers = row.get("answers", [])
    if not isinstance(answers, list) or not all(isinstance(a, str) for a in answers):
        return "answers not a list of strings"
    if "positive_ctxs" not in row:
        return "missing positive_ctxs"
    positives = _clean_contexts(row.get("positive_ctxs"), stats)
    hard = _clean_contexts(row.get("hard_negative_ctxs"), stats)
    negatives = _clean_contexts(row.get("negative_ctxs"), stats)
    if positives is None or hard is None or negatives is None:
        return "contexts not a list"
    if not positives:
        return "no positive context"
    return DPRExample(
        question.strip(),
        answers,
        positives,
        hard,
        negatives,
        id=str(row.get("id", "")),
        regex=bool(row.get("regex", False)),
    )


def read_dpr_file(path: str | Path, stats: ReadStats | None = None, limit: int = 0) -> list[DPRExample]:
    """Examples from DPR-format JSONL or JSON; bad rows are skipped and counted (see the module docstring)."""
    check_input(path, "training file")
    path = Path(path)
    stats = stats if stats is not None else ReadStats()
    out: list[DPRExample] = []
    for where, row in _rows(path):
        if limit and len(out) >= limit:
            break
        stats.rows += 1
        result = parse_row(row, stats)
        if isinstance(result, str):
            stats.skipped[result] += 1
            if stats.logged < MAX_LOGGED_SKIPS:
                log.warning("%s: skipped: %s", where, result)
                stats.logged += 1
            continue
        if not result.id:
            result.id = where
        out.append(result)
        stats.kept += 1
    if stats.logged >= MAX_LOGGED_SKIPS and stats.skipped_total > stats.logged:
        log.warning("%s: %d rows skipped in all (%s)", path, stats.skipped_total, dict(stats.skipped))
    return out


def write_dpr_jsonl(examples: Sequence[DPRExample], path: str | Path) -> None:
    with atomic_file(path) as tmp, tmp.open("w", encoding="utf-8") as f:
        for ex in examples:
            f.write(
                json.dumps(
                    {
                        "id": ex.id,
                        "question": ex.question,
                        "answers": ex.answers,
                        "regex": ex.regex,
                        "positive_ctxs": ex.positives,
                        "hard_negative_ctxs": ex.hard_negatives,
                        "negative_ctxs": ex.negatives,
                    },
                    ensure_ascii=False,
                )
                + "\n"
            )
