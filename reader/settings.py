"""How a reader reads: the one owner of its defaults. The pipeline's [reader] config section (odqa.config.ReaderConfig)
takes its defaults from here, so `ask`, `eval-reader` and a library user's `Reader.from_pretrained` read alike."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from odqa.core.model_files import load_model_settings
from odqa.core.runtime import INFERENCE, PRECISIONS, RUNTIMES
from odqa.reader.features import DEFAULT_MAX_LENGTH, DEFAULT_MAX_QUERY_TOKENS, DEFAULT_STRIDE


@dataclass
class ReaderSettings:
    max_length: int = DEFAULT_MAX_LENGTH
    stride: int = field(default=DEFAULT_STRIDE, metadata={"minimum": 0})  # tokens shared by two windows
    max_query_tokens: int = DEFAULT_MAX_QUERY_TOKENS
    # a bound in the checkpoint's own tokens, so each shipped reader records the one chosen on its dev sets in its
    # reader_config.json (its card has the figures); this default is for checkpoints that record none
    max_answer_tokens: int = 30
    # "no answer" when no span beats its passage's null score minus 2. Chosen on dev with the weight below
    # (figures in models/reader/README.md): it abstains mostly on questions their passages do not answer
    # and almost never on questions they do. None: always answer
    no_answer_threshold: float | None = -2.0
    # span-logit bonus of a question's best-retrieved passage over its worst (scores min-max scaled per
    # question). Chosen on open-dev and the squad-open tuning articles with reader v10, the demo, NQ-style and
    # Korean and Chinese sets beside them (bench/results/retrieval-weight.md)
    retrieval_weight: float = 7.5
    # weight of the reader's passage selection: minus each passage's null score added to its spans' scores
    # (decode.aggregate). 0: spans compared as the shared-normalised training scored them
    selection_weight: float = 0.0
    temperature: float = field(default=1.0, metadata={"minimum": 0.01})  # of the answers' share (a softmax)
    batch_size: int = 16  # windows per forward pass
    spans_per_window: int = 20
    # Korean and Chinese answers cut as their language cuts words (indexes.cutting): no trailing particle or
    # ending, never inside a word, brackets in pairs (bench/results/answer-cutting.md); False: the pieces' spans,
    # as Reader.from_pretrained(..., cut_answers=False) or a checkpoint's reader_config.json asks
    cut_answers: bool = True
    # auto: the rule of odqa.core.runtime (onnx int8 where `auto_int8`, else bf16 on CPUs with native bf16, onnx
    # fp32 on the others; fp16 on CUDA)
    precision: str = field(default=INFERENCE.precision, metadata={"choices": PRECISIONS})
    runtime: str = field(default=INFERENCE.runtime, metadata={"choices": RUNTIMES})  # odqa.core.runtime.plan_inference
    # this checkpoint's int8 F1 cost was measured within `auto`'s band (1 F1; its card has the figures), so `auto`
    # reads it in ONNX Runtime int8 on every CPU. A checkpoint's own record: training writes False
    auto_int8: bool = False
    # read a question's first N passages, the rest only when the best answer so far is unsure (its calibrated
    # probability below early_stop_probability; 0: read everything at once); a reader without a fitted
    # calibration reads them all
    early_stop_passages: int = field(default=1, metadata={"minimum": 0})
    # None: the reader's own confidence threshold (calibration.json), so reading stops only on an answer the
    # reader would call confident. A fixed number means something else under each calibration: one chosen with an
    # earlier reader's let a later one stop on answers it called unsure (bench/results/early-stop-confident.md)
    early_stop_probability: float | None = field(default=None, metadata={"minimum": 0, "maximum": 1})
    # with early stopping: the best-ranked passage read first, whole; where its answer is unsure, the second
    # whole and 80-word windows of the others. Chosen on the squad-open articles kept for choosing settings
    # (bench/results/speed-avx2.md, "Early stopping"). Read only the run of each passage's sentences that best
    # matches the question, at most this many words (reader.focus; 0: whole passages) ...
    focus_words: int = field(default=80, metadata={"minimum": 0})
    # ... except the first N passages of each question (retrieval order), which are read whole
    whole_passages: int = field(default=2, metadata={"minimum": 0})
    # the languages (ISO 639-1) the checkpoint was trained to read, recorded in its reader_config.json; text of
    # another language gets guesses, which the pipeline says and never calls confident (None: not recorded)
    languages: list[str] | None = None


# How to read at question time, rather than what a checkpoint was trained with: a model folder's
# reader_config.json (written with every setting, some of them before these defaults were chosen) does not
# change them; a caller's keyword or the [reader] config section does.
QUESTION_TIME_SETTINGS = (
    "no_answer_threshold",
    "retrieval_weight",
    "selection_weight",
    "early_stop_passages",
    "early_stop_probability",
    "focus_words",
    "whole_passages",
)

# None for these, passed to Reader.from_pretrained, means the checkpoint's own value (its reader_config.json): the
# [reader] config section leaves them unset, as their right value depends on the checkpoint's tokenizer
CHECKPOINT_OWN_SETTINGS = ("max_answer_tokens",)


READER_CONFIG = "reader_config.json"  # a checkpoint's own settings, beside its weights


def load_reader_config(path: str | Path) -> dict[str, Any]:
    """The settings a checkpoint's reader_config.json gives (its keys that are no ReaderSettings field are notes),
    each held to its field's rule: `"max_answer_tokens": 0`, NaN, `true` or `"20"` is refused in one line naming
    the file, the key, the value and the range, where it would make every answer empty or one token long."""
    return load_model_settings(path, ReaderSettings)
