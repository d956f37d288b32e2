"""How a reader reads: the one owner of its settings and their defaults. The [reader] section of the config
(odqa.config.OdqaConfig.reader) is a `ReaderSettings`, and `reader.registry.build_reader` builds every reader from
one, so `ask`, `eval-reader`, `fit-calibration`, the server, `bench/` and a library user's `Reader.from_pretrained`
read alike.

Three kinds of field: how to read at question time (the config's, whatever a checkpoint recorded), what a
checkpoint records about itself (`RECORDED_SETTINGS`: its reader_config.json gives them; not config keys), and
how models run (`precision`, `runtime`: the config's top-level settings, for every model)."""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from odqa.core.model_files import load_model_settings
from odqa.core.models import models_install, shipped_model
from odqa.core.runtime import INFERENCE, PRECISIONS, RUNTIMES
from odqa.core.settings import check_numbers, field_help
from odqa.indexes.analysis import LANGUAGE_NAMES
from odqa.reader.features import DEFAULT_MAX_LENGTH, DEFAULT_MAX_QUERY_TOKENS, DEFAULT_STRIDE

AUTO_READER = "auto"  # the shipped reader for the language of the text read (reader_for_language)
DEFAULT_READER = "reader"  # resolves to models/reader
MULTILINGUAL_READER = "reader-multilingual"
# readers odqa ships (models/<name>), or will: a missing one is named as such rather than looked up on the hub
SHIPPED_READERS = (DEFAULT_READER, MULTILINGUAL_READER)


def resolve_reader(name: str, language: str | Callable[[], str] | None = None) -> tuple[str, str]:
    """(name, why) of the reader `name` names: the one place `auto` is made concrete. `auto`: the shipped reader
    for the language of the text read (`language`, an ISO 639-1 code, or a function giving it, asked only for
    `auto`: finding it may open an index or read a data file; None: no text to go by, the English reader);
    any other name as given, with the reason ""."""
    if str(name).strip() != AUTO_READER:
        return name, ""
    if language is None:
        return DEFAULT_READER, "no text to go by"
    return reader_for_language(language() if callable(language) else language)


def reader_for_language(language: str) -> tuple[str, str]:
    """(name, why) of the shipped reader for text in `language`: the English reader for English, the
    multilingual one for Korean and Chinese where it is installed; without it the English reader, and the reason
    says that it reads text of a language it was not trained on."""
    names = LANGUAGE_NAMES.get(language, language)
    if language == "en":
        return DEFAULT_READER, "English text"
    if shipped_model(MULTILINGUAL_READER) is not None:
        return MULTILINGUAL_READER, f"{names} text"
    return DEFAULT_READER, (
        f"{names} text, but {MULTILINGUAL_READER} is not installed "
        f"({models_install(MULTILINGUAL_READER)}), so the English reader reads it"
    )


# a bound in the checkpoint's own tokens, so each shipped reader records the one chosen on its dev sets in its
# reader_config.json (its card has the figures); this one is for checkpoints that record none
FALLBACK_MAX_ANSWER_TOKENS = 30


def _recorded(default: Any = None, **metadata: Any) -> Any:
    """A field a checkpoint records about itself (reader_config.json): not a key of the [reader] section."""
    return field(default=default, metadata={"recorded": True, **metadata})


@dataclass
class ReaderSettings:
    model: str = field(
        default=AUTO_READER,
        metadata=field_help(
            "reader checkpoint: auto (the shipped reader for the index's language: 'reader' for English, "
            "'reader-multilingual' for Korean and Chinese where installed), 'reader', a registered reader "
            "(reader.registry.READERS), or any extractive-QA name/path"
        ),
    )
    top_n: int = field(default=5, metadata=field_help("answers returned per question", minimum=1))
    # calibration.json (run_qa.py fit-calibration); empty: the model folder's own, if it has one
    calibration: str = ""
    max_length: int = _recorded(DEFAULT_MAX_LENGTH)
    stride: int = _recorded(DEFAULT_STRIDE, minimum=0)  # tokens shared by two windows
    max_query_tokens: int = _recorded(DEFAULT_MAX_QUERY_TOKENS)
    # None: the checkpoint's own (its reader_config.json), else FALLBACK_MAX_ANSWER_TOKENS; a built reader always
    # holds a number
    max_answer_tokens: int | None = field(
        default=None,
        metadata=field_help(
            "longest answer span, in the reader's tokens (unset: the reader's own, from its reader_config.json)",
            minimum=1,
        ),
    )
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
    selection_weight: float = field(
        default=0.0,
        metadata=field_help(
            "weight of the reader's own passage selection: minus each passage's null score added to its spans' scores "
            "(0: spans compared as shared normalisation scored them)"
        ),
    )
    # span-logit bonus of a passage whose article is one of the entities linked in the question (the reader's
    # subjects: the pipeline links them when a linker runs). 0: where a passage comes from is not weighed
    subject_weight: float = field(
        default=0.0,
        metadata=field_help(
            "span-logit bonus of a passage whose article is an entity linked in the question (0: none; needs the "
            "linker)"
        ),
    )
    temperature: float = _recorded(1.0, minimum=0.01)  # of the answers' share (a softmax)
    batch_size: int = field(default=16, metadata=field_help("windows per forward pass", minimum=1))
    spans_per_window: int = _recorded(20, minimum=1)
    # Korean and Chinese answers cut as their language cuts words (indexes.cutting): no trailing particle or
    # ending, never inside a word, brackets in pairs (bench/results/answer-cutting.md); False: the pieces' spans,
    # as Reader.from_pretrained(..., cut_answers=False) or a checkpoint's reader_config.json asks
    cut_answers: bool = _recorded(True)
    # auto: the rule of odqa.core.runtime (onnx int8 where `auto_int8`, else bf16 on CPUs with native bf16, onnx
    # fp32 on the others; fp16 on CUDA). The config's top-level precision and runtime, for every model
    precision: str = field(default=INFERENCE.precision, metadata={"choices": PRECISIONS, "top_level": True})
    runtime: str = field(default=INFERENCE.runtime, metadata={"choices": RUNTIMES, "top_level": True})
    # this checkpoint's int8 F1 cost was measured within `auto`'s band (1 F1; its card has the figures), so `auto`
    # reads it in ONNX Runtime int8 on every CPU. A checkpoint's own record: training writes False
    auto_int8: bool = _recorded(False)
    # read a question's first N passages, the rest only when the best answer so far is unsure (its calibrated
    # probability below early_stop_probability; 0: read everything at once); a reader without a fitted
    # calibration reads them all
    early_stop_passages: int = field(
        default=1,
        metadata=field_help(
            "read the first N passages of each question first and the rest only when the best answer so far has a "
            "calibrated probability below --early-stop-probability (0: read all at once)",
            minimum=0,
        ),
    )
    # None: the reader's own confidence threshold (calibration.json), so reading stops only on an answer the
    # reader would call confident. A fixed number means something else under each calibration: one chosen with an
    # earlier reader's let a later one stop on answers it called unsure (bench/results/early-stop-confident.md)
    early_stop_probability: float | None = field(
        default=None,
        metadata=field_help(
            "with early_stop_passages: how sure the best answer must be to stop reading (unset: as sure as the "
            "reader's calibration requires to call an answer confident)",
            minimum=0,
            maximum=1,
        ),
    )
    # with early stopping: the best-ranked passage read first, whole; where its answer is unsure, the second
    # whole and 80-word windows of the others. Chosen on the squad-open articles kept for choosing settings
    # (bench/results/speed-avx2.md, "Early stopping"). Read only the run of each passage's sentences that best
    # matches the question, at most this many words (reader.focus; 0: whole passages) ...
    focus_words: int = field(
        default=80,
        metadata=field_help(
            "read only the run of each passage's sentences that best matches the question, at most this many words "
            "(reader/focus.py; 0: whole passages)",
            minimum=0,
        ),
    )
    # ... except the first N passages of each question (retrieval order), which are read whole
    whole_passages: int = field(
        default=2,
        metadata=field_help(
            "with focus_words: read the first N passages of each question (retrieval order) whole, the rest focused",
            minimum=0,
        ),
    )
    # the languages (ISO 639-1) the checkpoint was trained to read, recorded in its reader_config.json; text of
    # another language gets guesses, which the pipeline says and never calls confident (None: not recorded)
    languages: list[str] | None = _recorded(None)
    # trained to read each passage with the question's entity mark and the passage's article title
    # (reader.entity_marks): the pipeline then hands it the question's linked entities
    entity_marks: bool = _recorded(False)

    def validate(self) -> None:
        check_numbers(self, "reader.")

    @property
    def answer_tokens(self) -> int:
        """`max_answer_tokens`, or the fallback for a checkpoint that records none."""
        return self.max_answer_tokens if self.max_answer_tokens is not None else FALLBACK_MAX_ANSWER_TOKENS


# what a checkpoint records about itself: its reader_config.json gives them, the [reader] section does not
RECORDED_SETTINGS = tuple(f.name for f in fields(ReaderSettings) if f.metadata.get("recorded"))
# the config's top-level settings for every model: a [reader] key would be a second spelling of them
TOP_LEVEL_SETTINGS = tuple(f.name for f in fields(ReaderSettings) if f.metadata.get("top_level"))


# How to read at question time, rather than what a checkpoint was trained with: a model folder's
# reader_config.json (written with every setting, some of them before these defaults were chosen) does not
# change them; a caller's keyword or the [reader] config section does.
QUESTION_TIME_SETTINGS = (
    "no_answer_threshold",
    "retrieval_weight",
    "selection_weight",
    "subject_weight",
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


def with_checkpoint_record(
    given: ReaderSettings, recorded: dict[str, Any], explicit: Collection[str] = ()
) -> ReaderSettings:
    """The settings a checkpoint is read with: `given` (the [reader] section's, or a library caller's), overlaid
    with what the checkpoint records about itself (`recorded`, its reader_config.json): its RECORDED_SETTINGS,
    except those a caller set `explicit`ly, and its max_answer_tokens where `given` leaves it unset. Its
    question-time values (some saved before today's defaults were chosen) never apply."""
    settings = replace(given)
    for key, value in recorded.items():
        if key in explicit:
            continue
        if key in RECORDED_SETTINGS or (key == "max_answer_tokens" and given.max_answer_tokens is None):
            setattr(settings, key, value)
    settings.max_answer_tokens = settings.answer_tokens
    return settings
