"""Train an extractive reader (AutoModelForQuestionAnswering) on SQuAD-format JSON (v1 and v2).

* Windows come from `reader.features.tokenize_windows` (the same windows inference reads). A window that
  does not hold the whole answer, and every window of an unanswerable question, is labelled with the
  [CLS] token (index 0): the model's null span.
* Training answers whose text does not occur at `answer_start` are skipped, counted and logged.
* Deterministic for a seed: the batch order of every epoch is a function of (seed, epoch); dropout's RNG
  state is saved in each checkpoint.
* The loop is `odqa.core.training.TrainingLoop` (shared with the retriever and the linker); this module
  brings the examples, the batches and the model.
* Resumable: `output_dir/checkpoint-STEP/` holds the model, tokenizer and `trainer_state.pt` (optimizer,
  scheduler, step, RNG); a rerun with the same output_dir continues from the newest one. A rerun may also
  change --max-steps/--epochs (the linear schedule is rebuilt for the new total, from the saved step) or the
  training files (a curriculum: e.g. SQuAD first, then SQuAD + distant supervision); the result is then
  deterministic for the same sequence of commands. The windows are kept in `output_dir/windows-KEY/`
  (`reader.training.windows_cache`), so a resumed run does not re-tokenise unchanged training files.
* Batches are padded to their longest window and grouped by length (sorted inside chunks of 50 batches,
  then the batches shuffled), which roughly halves padding on CPU.
* With a GPU: bf16 (or fp16 with loss scaling) autocast and `gpu_batch_size`. On CPU, `precision="bf16"`
  autocasts matmuls to bf16 (weights and optimizer stay fp32), ~1.5x faster on CPUs with AMX.
"""

from __future__ import annotations

import json
import logging
import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from odqa.core.errors import DataFormatError, OdqaError
from odqa.core.inputs import check_input
from odqa.core.models import resolve_model
from odqa.core.training import (
    LoopSettings,
    TrainingLoop,
    keep_transformer_layers,
    latest_checkpoint,
    set_seed,
    training_device,
)
from odqa.corpus.open_dev import is_open_dev
from odqa.corpus.questions import check_not_test_set
from odqa.reader.entity_marks import add_mark_tokens, marked_question, subjects_from_titles
from odqa.reader.features import char_span_to_tokens, require_fast, tokenize_windows
from odqa.reader.settings import READER_CONFIG
from odqa.reader.training.train_config import TrainConfig  # there so the command line reads it without torch
from odqa.reader.training.windows_cache import PREFIX as WINDOWS_PREFIX
from odqa.reader.training.windows_cache import load_windows, save_windows, windows_key

log = logging.getLogger("odqa.reader.training.train")


@dataclass
class Example:
    id: str
    question: str
    context: str
    start_char: int = -1  # -1: unanswerable
    end_char: int = -1
    group: str = ""  # the question whose windows share a softmax with --shared-norm
    title: str = ""  # the passage's article
    subjects: list[str] | None = None  # titles of the question's linked entities (link-reader-data); None: not linked


@dataclass
class LoadStats:
    questions: int = 0
    answerable: int = 0
    unanswerable: int = 0
    dropped_negatives: int = 0
    skipped_bad_offset: int = 0
    kept_traditional: int = 0  # with to_simplified: contexts whose conversion changed their length
    skipped_examples: list[str] = field(default_factory=list)
    open_dev: int = 0  # questions of the open-dev split, never trained on


def load_squad_examples(
    path: str | Path,
    limit: int = 0,
    negative_ratio: float = 1.0,
    seed: int = 42,
    stats: LoadStats | None = None,
    all_answers: bool = False,
) -> list[Example]:
    """SQuAD v1/v2 JSON -> examples. The first answer whose text sits at its answer_start is used, or with
    `all_answers` every distinct such answer (one example each; answers not at their offset are dropped)."""
    path = Path(path)
    stats = stats if stats is not None else LoadStats()
    check_input(path, "training file")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        articles = data["data"]
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise DataFormatError(f"{path}: not SQuAD-format JSON (expected {{'data': [...]}}): {exc}") from exc
    rng = random.Random(seed)
    out: list[Example] = []
    read = 0  # questions of this file (`limit` is per file; `stats` may count several files)
    for article in articles:
        title = str(article.get("title") or "")
        for paragraph in article.get("paragraphs", []):
            context = paragraph["context"]
            for qa in paragraph.get("qas", []):
                if limit and read >= limit:
                    return out
                read += 1
                stats.questions += 1
                if is_open_dev(qa["question"]):
                    stats.open_dev += 1
                    continue
                qid = str(qa.get("id", stats.questions))
                answers = qa.get("answers") or []
                if qa.get("is_impossible") or not answers:
                    if negative_ratio < 1.0 and rng.random() >= negative_ratio:
                        stats.dropped_negatives += 1
                        continue
                    stats.unanswerable += 1
                    out.append(Example(qid, qa["question"], context, title=title, subjects=qa.get("subjects")))
                    continue
                chosen: list[tuple[int, int]] = []
                for a in answers:
                    start = int(a.get("answer_start", -1))
                    text = a.get("text", "")
                    span = (start, start + len(text))
                    if text and start >= 0 and context[start : span[1]] == text and span not in chosen:
                        chosen.append(span)
                        if not all_answers:
                            break
                if not chosen:
                    stats.skipped_bad_offset += 1
                    if len(stats.skipped_examples) < 20:
                        stats.skipped_examples.append(qid)
                    log.warning("%s: question %s skipped: answer text not found at its answer_start", path, qid)
                    continue
                stats.answerable += 1
                out.extend(
                    Example(qid, qa["question"], context, *span, title=title, subjects=qa.get("subjects"))
                    for span in chosen
                )
    return out


def simplify_chinese(examples: list[Example], stats: LoadStats | None = None) -> list[Example]:
    """Chinese questions and passages folded to Simplified (OpenCC t2s, as the BM25 analysers fold them), answer
    offsets unchanged; other languages (Korean with its Hanja too) stay as they are. A passage whose conversion changes
    its length (a phrase mapped to one of another length) stays as it is, with its questions, so that no label moves;
    counted in `stats.kept_traditional`."""
    from odqa.indexes.analysis import detect_language, to_simplified

    converted: dict[str, str | None] = {}
    out: list[Example] = []
    for ex in examples:
        if ex.context not in converted:
            simple = to_simplified(ex.context) if detect_language([ex.context]) == "zh" else None
            converted[ex.context] = simple if simple is not None and len(simple) == len(ex.context) else None
            if simple is not None and converted[ex.context] is None and stats is not None:
                stats.kept_traditional += 1
        context = converted[ex.context]
        if context is None:
            out.append(ex)
            continue
        out.append(
            Example(
                ex.id, to_simplified(ex.question), context, ex.start_char, ex.end_char, ex.group, ex.title, ex.subjects
            )
        )
    return out


def build_features(
    tokenizer, examples: list[Example], cfg: TrainConfig, chunk: int = 1000, teacher_tokenizer=None
) -> dict[str, list]:
    """Windows with start/end token labels (0, 0 = null span). With `teacher_tokenizer`, each window's passage
    slice is also tokenised for the teacher (`teacher_ids`), with the teacher's token that starts (ends) at each
    student token's first (last) character (`teacher_start_map`, `teacher_end_map`; -1: none, [CLS] to [CLS])."""
    feats: dict[str, list] = {"input_ids": [], "token_type_ids": [], "start": [], "end": [], "group": []}
    if teacher_tokenizer is not None:
        feats.update(teacher_ids=[], teacher_start_map=[], teacher_end_map=[])
    for lo in range(0, len(examples), chunk):
        part = examples[lo : lo + chunk]
        w = tokenize_windows(
            tokenizer,
            [e.question for e in part],
            [e.context for e in part],
            max_length=cfg.max_length,
            stride=cfg.stride,
            max_query_tokens=cfg.max_query_tokens,
        )
        for i, s in enumerate(w.sample):
            ex = part[s]
            span = None
            if ex.start_char >= 0:
                span = char_span_to_tokens(w, i, ex.start_char, ex.end_char)
            feats["input_ids"].append(w.encoding["input_ids"][i])
            tt = w.encoding.get("token_type_ids")
            feats["token_type_ids"].append(tt[i] if tt is not None else [0] * len(w.encoding["input_ids"][i]))
            feats["start"].append(span[0] if span else 0)
            feats["end"].append(span[1] if span else 0)
            feats["group"].append(ex.group)
        if teacher_tokenizer is not None:
            _add_teacher_windows(teacher_tokenizer, w, part, cfg, feats)
    return feats


def _add_teacher_windows(teacher_tokenizer, w, part: list[Example], cfg: TrainConfig, feats: dict[str, list]) -> None:
    """The teacher reads each student window's question and exactly its passage slice; its tokens are matched to
    the student's by character offsets, so teachers with another vocabulary or special tokens still align."""
    slices = []
    for i, s in enumerate(w.sample):
        cs, ce = w.context_start[i], w.context_end[i]
        first = w.offsets[i][cs][0] if ce >= cs else 0
        last = w.offsets[i][ce][1] if ce >= cs else 0
        slices.append((part[s].question.strip(), part[s].context[first:last], first))
    enc = teacher_tokenizer(
        [q for q, _, _ in slices],
        [c for _, c, _ in slices],
        truncation="only_second",
        max_length=cfg.max_length + 32,
        return_offsets_mapping=True,
        padding=False,
    )
    for i, (_, text, first) in enumerate(slices):
        starts: dict[int, int] = {}
        ends: dict[int, int] = {}
        for k, (seq, (a, b)) in enumerate(zip(enc.sequence_ids(i), enc["offset_mapping"][i])):
            while a < b and text[a].isspace():  # sentencepiece tokenizers (XLM-R) count the space before a word
                a += 1
            while b > a and text[b - 1].isspace():
                b -= 1
            if seq == 1 and b > a:
                starts.setdefault(first + a, k)
                ends[first + b] = k
        n = len(w.encoding["input_ids"][i])
        start_map, end_map = [-1] * n, [-1] * n
        start_map[0] = end_map[0] = 0  # the null span: [CLS] of both (position 0 for either padding side)
        for j, off in enumerate(w.offsets[i]):
            if off is not None and off[1] > off[0]:
                start_map[j] = starts.get(off[0], -1)
                end_map[j] = ends.get(off[1], -1)
        feats["teacher_ids"].append(enc["input_ids"][i])
        if "token_type_ids" in teacher_tokenizer.model_input_names and "token_type_ids" in enc:
            feats.setdefault("teacher_token_type_ids", []).append(enc["token_type_ids"][i])
        feats["teacher_start_map"].append(start_map)
        feats["teacher_end_map"].append(end_map)


def question_batches(groups: list, lengths: list[int], batch_size: int, seed: int, epoch: int) -> list[list[int]]:
    """Deterministic, length-grouped batches of whole questions (`groups`: each window's question): a question's
    windows always share a batch (one with more windows than `batch_size` is a batch of its own). Questions are
    shuffled, sorted by length inside chunks of about 50 batches, packed, then the batches shuffled, which
    roughly halves padding on CPU."""
    rng = random.Random(seed * 1000003 + epoch)
    by_group: dict = {}
    for i, g in enumerate(groups):
        by_group.setdefault(g, []).append(i)
    units = list(by_group.values())
    rng.shuffle(units)
    chunk_windows = batch_size * 50
    batches: list[list[int]] = []
    lo = 0
    while lo < len(units):
        chunk, n = [], 0
        while lo < len(units) and n < chunk_windows:
            chunk.append(units[lo])
            n += len(units[lo])
            lo += 1
        chunk.sort(key=lambda u: -max(lengths[i] for i in u))
        current: list[int] = []
        for unit in chunk:
            if current and len(current) + len(unit) > batch_size:
                batches.append(current)
                current = []
            current = current + unit
        if current:
            batches.append(current)
    rng.shuffle(batches)
    return batches


def shared_norm_loss(
    start_logits: torch.Tensor,
    end_logits: torch.Tensor,
    attention_mask: torch.Tensor,
    start_positions: torch.Tensor,
    end_positions: torch.Tensor,
    groups: list[int],
) -> torch.Tensor:
    """Clark and Gardner's shared normalisation: for each question of the batch with an answer in some window,
    minus the log of the probability mass its answer's starts (and ends) hold in one softmax over every token of
    all its windows ([CLS] and padding excluded), so spans of different passages are scored on one scale, as
    `decode.aggregate` compares them. Several answer-holding windows are marginalised. Zero when no question
    of the batch has an answer."""
    mask = attention_mask.bool().clone()
    mask[:, 0] = False
    answered = start_positions > 0
    group_ids = torch.tensor(groups, device=start_logits.device)
    losses = []
    for logits, gold in ((start_logits.float(), start_positions), (end_logits.float(), end_positions)):
        row_mass = torch.logsumexp(logits.masked_fill(~mask, float("-inf")), dim=1)
        gold_logit = logits.gather(1, gold.unsqueeze(1)).squeeze(1)
        for g in torch.unique(group_ids[answered]):
            rows = group_ids == g
            losses.append(torch.logsumexp(row_mass[rows], 0) - torch.logsumexp(gold_logit[rows & answered], 0))
    if not losses:
        return start_logits.sum() * 0.0
    return torch.stack(losses).mean()


def selection_loss(
    start_logits: torch.Tensor, end_logits: torch.Tensor, start_positions: torch.Tensor, groups: list[int]
) -> torch.Tensor:
    """The reader's passage selection, DPR-style but on the null score: for each question of the batch with an
    answer in some window, minus the log of the probability its answer-holding windows get in one softmax over
    all its windows of minus their null scores ([CLS] start + end logits). A window that holds the answer is to
    have a lower null score than one that does not. Zero when no question of the batch has an answer."""
    selection = -(start_logits[:, 0].float() + end_logits[:, 0].float())
    answered = start_positions > 0
    group_ids = torch.tensor(groups, device=start_logits.device)
    losses = [
        torch.logsumexp(selection[group_ids == g], 0) - torch.logsumexp(selection[(group_ids == g) & answered], 0)
        for g in torch.unique(group_ids[answered])
    ]
    if not losses:
        return start_logits.sum() * 0.0
    return torch.stack(losses).mean()


def mark_questions(examples: list[Example], files: Sequence[str]) -> None:
    """Each example's question as a reader with entity marks reads it beside its passage (reader.entity_marks);
    refused where the files carry no linked entities, which would teach the reader that nothing is ever linked."""
    if not any(ex.subjects is not None for ex in examples):
        raise OdqaError(
            f"--entity-marks needs the questions' linked entities in the training files ({', '.join(files)}): run "
            "`run_qa.py link-reader-data --data FILE --kb KB --output FILE` on each first"
        )
    for ex in examples:
        ex.question = marked_question(ex.question, ex.title, subjects_from_titles(ex.subjects))


def drop_unanswered_questions(examples: list[Example], ratio: float, seed: int) -> tuple[list[Example], int]:
    """With --shared-norm, --negative-ratio keeps this fraction of the questions none of whose passages holds an
    answer (all their windows are null), and every passage of the others: a question's unanswering passages
    are what the shared softmax learns to score below its answer."""
    if ratio >= 1.0:
        return examples, 0
    answered = {e.group for e in examples if e.start_char >= 0}
    rng = random.Random(seed)
    keep = {g: g in answered or rng.random() < ratio for g in dict.fromkeys(e.group for e in examples)}
    kept = [e for e in examples if keep[e.group]]
    return kept, sum(1 for v in keep.values() if not v)


def _pad(rows: list[list[int]], fill: int, length: int = 0) -> torch.Tensor:
    """Rows of ints as one long tensor, padded with `fill` to the longest row or to `length` if that is longer."""
    from torch.nn.utils.rnn import pad_sequence

    padded = pad_sequence([torch.tensor(r, dtype=torch.long) for r in rows], batch_first=True, padding_value=fill)
    if padded.shape[1] < length:
        padded = torch.nn.functional.pad(padded, (0, length - padded.shape[1]), value=fill)
    return padded


def collate(feats: dict[str, list], idx: list[int], pad_id: int, token_types: bool = True) -> dict[str, torch.Tensor]:
    """A padded batch; `token_types=False` for models that take no token_type_ids (MPNet, RoBERTa)."""
    batch = {
        "input_ids": _pad([feats["input_ids"][i] for i in idx], pad_id),
        "attention_mask": _pad([[1] * len(feats["input_ids"][i]) for i in idx], 0),
        "start_positions": torch.tensor([feats["start"][i] for i in idx]),
        "end_positions": torch.tensor([feats["end"][i] for i in idx]),
    }
    if token_types:
        batch["token_type_ids"] = _pad([feats["token_type_ids"][i] for i in idx], 0)
    return batch


def collate_teacher(
    feats: dict[str, list], idx: list[int], pad_id: int, student_length: int
) -> dict[str, torch.Tensor]:
    """The teacher's padded inputs for the windows `idx`, and its start/end position for each student token
    (padded with -1 to the student batch's length)."""
    batch = {
        "input_ids": _pad([feats["teacher_ids"][i] for i in idx], pad_id),
        "attention_mask": _pad([[1] * len(feats["teacher_ids"][i]) for i in idx], 0),
        "start_map": _pad([feats["teacher_start_map"][i] for i in idx], -1, student_length),
        "end_map": _pad([feats["teacher_end_map"][i] for i in idx], -1, student_length),
    }
    if "teacher_token_type_ids" in feats:
        batch["token_type_ids"] = _pad([feats["teacher_token_type_ids"][i] for i in idx], 0)
    return batch


def teacher_logits_on_student_tokens(logits: torch.Tensor, position_map: torch.Tensor) -> torch.Tensor:
    """The teacher's logit at each student token's matching position; -inf where no teacher token matches."""
    picked = logits.float().gather(1, position_map.clamp(min=0))
    return picked.masked_fill(position_map < 0, float("-inf"))


def _kl(teacher: torch.Tensor, student: torch.Tensor) -> torch.Tensor:
    """KL(softmax(teacher) || softmax(student)) over the last dimension, -inf entries excluded from each side's
    softmax; rows where the teacher has no finite entry count 0."""
    t_log = torch.log_softmax(teacher, dim=-1)
    s_log = torch.log_softmax(student, dim=-1)
    t_prob = t_log.exp()
    terms = torch.where(t_prob > 0, t_prob * (t_log - s_log.clamp(min=-1e4)), torch.zeros_like(t_prob))
    return terms.nan_to_num(0.0).sum(-1)


def distill_loss(
    student_start: torch.Tensor,
    student_end: torch.Tensor,
    teacher_start: torch.Tensor,
    teacher_end: torch.Tensor,
    attention_mask: torch.Tensor,
    temperature: float,
    groups: list[int] | None = None,
) -> torch.Tensor:
    """Hinton's soft-target loss (times T squared) between the teacher's and the student's start and end
    distributions over each window's tokens (padding excluded; student tokens with no teacher match get the
    teacher's probability 0). With `groups` (each window's question, under shared normalisation), also over all
    windows of a question in one softmax ([CLS] excluded), the scale on which reading compares passages."""
    valid = attention_mask.bool()
    losses = []
    for s_logits, t_logits in ((student_start, teacher_start), (student_end, teacher_end)):
        s = (s_logits.float() / temperature).masked_fill(~valid, float("-inf"))
        t = (t_logits / temperature).masked_fill(~valid, float("-inf"))
        losses.append(_kl(t, s).mean())
        if groups is not None:
            inside = valid.clone()
            inside[:, 0] = False
            group_ids = torch.tensor(groups, device=s.device)
            s_in, t_in = s.masked_fill(~inside, float("-inf")), t.masked_fill(~inside, float("-inf"))
            per_group = [
                _kl(t_in[group_ids == g].reshape(-1), s_in[group_ids == g].reshape(-1)) for g in torch.unique(group_ids)
            ]
            losses.append(torch.stack(per_group).mean())
    return temperature**2 * torch.stack(losses).mean()


def load_qa_model(name_or_path: str):
    from transformers import AutoModelForQuestionAnswering, AutoTokenizer

    path = resolve_model(name_or_path)
    try:
        tokenizer = AutoTokenizer.from_pretrained(path)
        # fp32 master weights whatever the files hold: the shipped models are fp16, and transformers loads a
        # checkpoint in its stored dtype (fp16 training on a CPU is slow and loses updates below fp16's precision)
        model = AutoModelForQuestionAnswering.from_pretrained(path, dtype=torch.float32)
    except (OSError, ValueError, KeyError) as exc:
        raise OdqaError(f"cannot load {name_or_path!r} as a question-answering model: {exc}") from exc
    return model, tokenizer


def parse_layers(spec: str) -> list[int]:
    try:
        layers = [int(part) for part in spec.split(",") if part.strip()]
    except ValueError:
        raise OdqaError(f"--keep-layers {spec!r}: give layer numbers joined by commas, e.g. 0,2,4,6,8,10") from None
    if not layers or layers != sorted(set(layers)) or layers[0] < 0:
        raise OdqaError(f"--keep-layers {spec!r}: give distinct layer numbers from 0 up, in increasing order")
    return layers


def featurising_modules() -> list:
    """The modules whose code decides a run's windows: a change to any of them makes kept windows stale."""
    import sys

    from odqa.corpus import open_dev
    from odqa.reader import entity_marks, features

    return [sys.modules[__name__], features, entity_marks, open_dev]


def read_training_windows(
    cfg: TrainConfig, tokenizer, teacher_tokenizer=None
) -> tuple[dict[str, list], LoadStats, set[str]]:
    """Read the training files and cut them into labelled windows; also what was read and the languages seen."""
    from odqa.indexes.analysis import detect_language

    stats = LoadStats()
    examples: list[Example] = []
    languages: set[str] = set()  # recorded with the model: what it reads (reader.settings.ReaderSettings.languages)
    for number, f in enumerate(cfg.train_files):
        loaded = load_squad_examples(
            f, cfg.limit, 1.0 if cfg.shared_norm else cfg.negative_ratio, cfg.seed, stats, cfg.all_answers
        )
        for ex in loaded:  # distant supervision writes one entry per (question, passage): the text is the key
            ex.group = f"{number}\t{ex.question}"
        examples += loaded
        if loaded:
            languages.add(detect_language([ex.context for ex in loaded[:50]]))
    if cfg.shared_norm:
        examples, dropped = drop_unanswered_questions(examples, cfg.negative_ratio, cfg.seed)
        log.info(
            "shared normalisation over each question's windows; %d "
            "questions without an answering passage dropped (ratio %.2f)",
            dropped,
            cfg.negative_ratio,
        )
    if not examples:
        raise OdqaError("no training examples left after loading " + ", ".join(cfg.train_files))
    if cfg.to_simplified:
        examples = simplify_chinese(examples, stats)
        log.info(
            "Chinese folded to Simplified; %d passages kept as they were (their conversion changed length)",
            stats.kept_traditional,
        )
    log.info(
        "loaded %d questions: %d answerable, %d unanswerable, %d negatives dropped (ratio %.2f), "
        "%d skipped because the answer is not at answer_start, %d open-dev questions skipped%s",
        stats.questions,
        stats.answerable,
        stats.unanswerable,
        stats.dropped_negatives,
        cfg.negative_ratio,
        stats.skipped_bad_offset,
        stats.open_dev,
        f" (e.g. {', '.join(stats.skipped_examples[:5])})" if stats.skipped_examples else "",
    )
    if cfg.entity_marks:
        mark_questions(examples, cfg.train_files)
    return build_features(tokenizer, examples, cfg, teacher_tokenizer=teacher_tokenizer), stats, languages


def train(cfg: TrainConfig, on_step: Callable[[int, float], None] | None = None) -> Path:
    """Train (or resume) and return the folder of the final model."""
    from transformers import get_linear_schedule_with_warmup

    for f in cfg.train_files:
        check_not_test_set(f)
    if cfg.selection_loss and not cfg.shared_norm:
        raise OdqaError("--selection-loss compares the windows of one question: it needs --shared-norm (e.g. 1.0)")
    out = Path(cfg.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    device, precision = training_device(cfg.device, cfg.precision, cfg.threads)
    batch_size = cfg.gpu_batch_size if device.type == "cuda" else cfg.batch_size

    set_seed(cfg.seed)
    resume = latest_checkpoint(out)
    model, tokenizer = load_qa_model(str(resume) if resume else cfg.init)
    if cfg.keep_layers and not resume:  # a checkpoint has the reduced layers already
        keep_transformer_layers(model.base_model, parse_layers(cfg.keep_layers), "--keep-layers", cfg.init)
    if cfg.freeze_embeddings:
        model.get_input_embeddings().weight.requires_grad_(False)
    model.to(device)
    teacher: Any = None
    teacher_tokenizer: Any = None
    if cfg.teacher:
        teacher, teacher_tokenizer = load_qa_model(cfg.teacher)
        require_fast(teacher_tokenizer)
        teacher.requires_grad_(False)
        teacher.eval().to(device)
        log.info(
            "distilling from %s (weight %.2f, temperature %.1f)",
            cfg.teacher,
            cfg.distill_weight,
            cfg.distill_temperature,
        )

    t0 = time.time()
    if cfg.entity_marks:
        add_mark_tokens(tokenizer)
    # the teacher's windows are not kept: a distilling run reads its files each time
    cache_key = None if teacher is not None else windows_key(cfg, tokenizer, featurising_modules())
    cached = load_windows(out, cache_key) if cache_key else None
    if cached is not None:
        feats, stats, languages = cached.feats, LoadStats(**cached.stats), set(cached.languages)
        log.info("windows read from %s%s (kept from an earlier start of this run)", WINDOWS_PREFIX, cache_key)
    else:
        feats, stats, languages = read_training_windows(cfg, tokenizer, teacher_tokenizer)
        if cache_key:
            save_windows(out, cache_key, feats, stats, languages)
    lengths = [len(x) for x in feats["input_ids"]]
    n_null = sum(1 for s in feats["start"] if s == 0)
    log.info(
        "%d windows (%d labelled null) in %.1fs; mean length %.0f tokens",
        len(lengths),
        n_null,
        time.time() - t0,
        sum(lengths) / len(lengths),
    )

    group_number = {g: n for n, g in enumerate(dict.fromkeys(feats["group"]))}
    window_question = [group_number[g] for g in feats["group"]] if cfg.shared_norm else list(range(len(lengths)))

    def batches_for(epoch: int) -> list[list[int]]:
        return question_batches(window_question, lengths, batch_size, cfg.seed, epoch)

    # packing whole questions gives each epoch about the same number of batches, not always exactly: the schedule
    # counts the first epoch's, a shorter epoch repeats its first batches, a longer one stops early
    batches_of_epoch: dict[int, list[list[int]]] = {0: batches_for(0)}  # the current epoch's batch order only
    per_epoch = len(batches_of_epoch[0])
    total = cfg.max_steps if cfg.max_steps > 0 else math.ceil(cfg.epochs * per_epoch)
    no_decay = ("bias", "LayerNorm.weight", "layer_norm", "norm.weight")
    trained = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    groups = [
        {"params": [p for n, p in trained if not any(k in n for k in no_decay)], "weight_decay": cfg.weight_decay},
        {"params": [p for n, p in trained if any(k in n for k in no_decay)], "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW(groups, lr=cfg.lr)
    scheduler = get_linear_schedule_with_warmup(optimizer, int(cfg.warmup * total), total)
    pad_id = tokenizer.pad_token_id or 0
    token_types = "token_type_ids" in tokenizer.model_input_names

    def train_step(step: int) -> dict:
        epoch, pos = divmod(step, per_epoch)
        if epoch not in batches_of_epoch:
            batches_of_epoch.clear()
            batches_of_epoch[epoch] = batches_for(epoch)
        order = batches_of_epoch[epoch]
        idx = order[pos % len(order)]
        batch = {k: v.to(device) for k, v in collate(feats, idx, pad_id, token_types).items()}
        with loop.autocast():
            out = model(**batch)
            loss = out.loss
            if cfg.shared_norm:
                loss = loss + cfg.shared_norm * shared_norm_loss(
                    out.start_logits,
                    out.end_logits,
                    batch["attention_mask"],
                    batch["start_positions"],
                    batch["end_positions"],
                    [window_question[i] for i in idx],
                )
                if cfg.selection_loss:
                    loss = loss + cfg.selection_loss * selection_loss(
                        out.start_logits, out.end_logits, batch["start_positions"], [window_question[i] for i in idx]
                    )
            if teacher is not None:
                taught = {
                    k: v.to(device)
                    for k, v in collate_teacher(
                        feats, idx, teacher_tokenizer.pad_token_id or 0, batch["input_ids"].shape[1]
                    ).items()
                }
                with torch.no_grad():
                    t_out = teacher(**{k: v for k, v in taught.items() if not k.endswith("_map")})
                loss = loss + cfg.distill_weight * distill_loss(
                    out.start_logits,
                    out.end_logits,
                    teacher_logits_on_student_tokens(t_out.start_logits, taught["start_map"]),
                    teacher_logits_on_student_tokens(t_out.end_logits, taught["end_map"]),
                    batch["attention_mask"],
                    cfg.distill_temperature,
                    [window_question[i] for i in idx] if cfg.shared_norm else None,
                )
        loop.backward(loss)
        return {"loss": float(loss.detach()), "windows": len(idx)}

    def save_model(folder: Path) -> None:
        model.save_pretrained(str(folder))
        tokenizer.save_pretrained(str(folder))
        if cfg.entity_marks:  # what it was trained to read, for Reader.from_pretrained and export
            (folder / READER_CONFIG).write_text(json.dumps({"entity_marks": True}, indent=2))

    loop = TrainingLoop(
        LoopSettings(
            out,
            total,
            per_epoch,
            name="train-reader",
            save_every=cfg.save_every,
            keep_checkpoints=cfg.keep_checkpoints,
            log_every=cfg.log_every,
            count="windows",
            max_seconds=cfg.max_minutes * 60,
            progress=cfg.progress,
        ),
        params=model.parameters(),
        optimizer=optimizer,
        scheduler=scheduler,
        device=device,
        precision=precision,
        train_step=train_step,
        save_model=save_model,
        on_step=on_step,
        logger=log,
    )
    loop.resume(resume)
    (out / "train_config.json").write_text(json.dumps(cfg.to_dict(), indent=2))
    model.train()
    log.info("training %d steps (%d per epoch, batch %d, %s on %s)", total, per_epoch, batch_size, precision, device)
    result = loop.run()
    final = out / "final"
    final.mkdir(parents=True, exist_ok=True)
    save_model(final)
    (final / "train_info.json").write_text(
        json.dumps(
            {
                "config": cfg.to_dict(),
                "steps": result.step,
                "planned_steps": total,
                "stopped_by": result.stopped_by,
                "train_seconds": result.seconds,
                "windows": len(lengths),
                "questions": stats.questions,
                "answerable": stats.answerable,
                "unanswerable": stats.unanswerable,
                "skipped_bad_offset": stats.skipped_bad_offset,
                "kept_traditional": stats.kept_traditional,
                "languages": sorted(languages),
                "device": str(device),
                "precision": precision,
            },
            indent=2,
        )
    )
    log.info("saved %s", final)
    return final
