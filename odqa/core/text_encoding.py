"""What every text encoder shares, with torch or without: its kind and settings, query and passage prefixes,
(title, text) passages, batching by length and normalised vectors; and `OnnxTextEncoder`, the cached ONNX graph
of a model's weight files alone (odqa.core.runtime). Importing this module never imports torch.

The torch encoder is odqa.core.encoder.TextEncoder; odqa.core.encoder_loading picks between the two.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from odqa.core.errors import IndexMismatchError, OdqaError
from odqa.core.model_files import checked_values, load_model_settings, read_model_json
from odqa.core.models import resolve_model
from odqa.core.runtime import INFERENCE, InferencePlan, InferenceSettings, OnnxModel, announce, plan_inference

POOLINGS = ("mean", "cls")
SIMILARITIES = ("cosine", "dot")
DEFAULT_MAX_LENGTH = 256
# a passage given as (title, text): DPR encodes the pair, the others "title | text"
PassageInput = str | tuple[str, str]
# pooling and similarity of a model folder that does not say (a sentence-transformers folder does)
KIND_DEFAULTS = {
    "dpr": {"pooling": "cls", "similarity": "dot"},
    "transformers": {"pooling": "mean", "similarity": "cosine"},
}


def encoder_kind(path: str) -> str:
    """sentence-transformers | dpr | transformers, from the files of a local folder (hub names: transformers)."""
    folder = Path(path)
    if (folder / "modules.json").is_file():
        return "sentence-transformers"
    config = folder / "config.json"
    if config.is_file() and read_model_json(config).get("model_type") == "dpr":
        return "dpr"
    return "transformers"


# the module configuration files sentence-transformers reads, in its order (the older names: its early versions')
ST_MODULE_CONFIGS = (
    "sentence_bert_config.json",
    "sentence_roberta_config.json",
    "sentence_distilbert_config.json",
    "sentence_camembert_config.json",
    "sentence_albert_config.json",
    "sentence_xlm-roberta_config.json",
    "sentence_xlnet_config.json",
)


def encoder_max_length(name_or_path: str) -> int:
    """The passage length an encoder was made for, as TextEncoder.from_pretrained applies it when given none: a
    sentence-transformers folder's max_seq_length, found as sentence-transformers finds it (multilingual e5: 512),
    else DEFAULT_MAX_LENGTH."""
    return folder_max_length(resolve_model(name_or_path))


def folder_max_length(folder: str | Path) -> int:
    """`encoder_max_length` of an encoder already resolved to its folder (or hub name)."""
    if encoder_kind(str(folder)) == "sentence-transformers":
        return sentence_transformers_max_length(Path(folder)) or DEFAULT_MAX_LENGTH
    return DEFAULT_MAX_LENGTH


def sentence_transformers_max_length(folder: Path) -> int | None:
    """sentence-transformers' rules for its Transformer module's limit, from the files alone (no weights loaded):
    the module configuration's max_seq_length (older versions save it there), else a model_max_length it passes
    to the tokenizer, else the tokenizer_config.json's model_max_length (where version 6 saves it); capped by the
    model's max_position_embeddings where the limit came from the tokenizer. None where no file says."""
    modules = read_model_json(folder / "modules.json", expect=list)
    transformer = next((m for m in modules if str(m.get("type", "")).endswith("Transformer")), None)
    module = folder / (transformer or {}).get("path", "")
    config_file = next((module / name for name in ST_MODULE_CONFIGS if (module / name).is_file()), None)
    config = read_model_json(config_file) if config_file is not None else {}
    if config_file is not None:
        checked_values(config_file, config, SentenceTransformersModule)
    if config.get("max_seq_length"):
        return int(config["max_seq_length"])
    for kwargs in (config.get("processor_kwargs"), config.get("tokenizer_args")):
        if isinstance(kwargs, dict) and kwargs.get("model_max_length"):
            return int(kwargs["model_max_length"])
    tokenizer = module / "tokenizer_config.json"
    length = read_model_json(tokenizer).get("model_max_length") if tokenizer.is_file() else None
    if not isinstance(length, (int, float)) or length >= 1e9:  # transformers' "no limit" is 1e30
        return None
    model = module / "config.json"
    positions = read_model_json(model).get("max_position_embeddings", -1) if model.is_file() else -1
    return int(min(length, positions)) if positions not in (None, -1) else int(length)


@dataclass(frozen=True)
class SentenceTransformersModule:
    """The values odqa reads of a sentence-transformers Transformer module's config (sentence_bert_config.json)."""

    max_seq_length: int | None = None
    do_lower_case: bool = False


# sentence-transformers' pooling switches before version 6 (which writes one "pooling_mode")
ST_LEGACY_POOLING = {
    "pooling_mode_cls_token": "cls",
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_max_tokens": "max",
    "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
    "pooling_mode_weightedmean_tokens": "weightedmean",
    "pooling_mode_lasttoken": "lasttoken",
}


def _st_module_class(entry: dict) -> str:
    """The class name of a modules.json entry (its module path moved between sentence-transformers versions)."""
    name = str(entry.get("type", ""))
    return name.rsplit(".", 1)[-1] if name.startswith("sentence_transformers.") else ""


def _st_pooling_mode(config: dict):
    if "pooling_mode" in config:
        return config["pooling_mode"]
    active = [mode for key, mode in ST_LEGACY_POOLING.items() if config.get(key)]
    return active[0] if len(active) == 1 else ("mean" if not active else None)


@dataclass(frozen=True)
class SentenceTransformersLayout:
    """What a sentence-transformers folder computes, read from its JSON files (no torch, no weights)."""

    pooling: str
    similarity: str  # its own: Normalize makes it cosine, else config_sentence_transformers.json's similarity
    query_prefix: str
    passage_prefix: str
    configs_digest: str  # of every file besides the weights that shapes its vectors


def sentence_transformers_layout(folder: str | Path) -> SentenceTransformersLayout | None:
    """The layout of a sentence-transformers folder whose graph odqa names by its files: a Transformer at the
    folder's top (its weights are the folder's own weight files) that does not lower-case, one Pooling by mean
    or [CLS], optionally Normalize. None for any other layout (dense layers, weights in module subfolders, other
    poolings): those are loaded with torch and their graph named by their live weights."""
    folder = Path(folder)
    try:
        modules = read_model_json(folder / "modules.json", expect=list)
        classes = [_st_module_class(m) for m in modules]
        if (
            classes not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"])
            or modules[0].get("path", "") != ""
        ):
            return None
        module_config = next((folder / name for name in ST_MODULE_CONFIGS if (folder / name).is_file()), None)
        if module_config is not None and read_model_json(module_config).get("do_lower_case"):
            return None
        pooling_file = folder / modules[1].get("path", "") / "config.json"
        pooling_config = read_model_json(pooling_file)
        # a pooling that leaves the prompt's tokens out needs the prompt's length, which the graph is not given
        if pooling_config.get("include_prompt", True) is False:
            return None
        pooling = {"cls": "cls", "mean": "mean"}.get(_st_pooling_mode(pooling_config))
        settings_file = folder / "config_sentence_transformers.json"
        settings = read_model_json(settings_file) if settings_file.is_file() else {}
    except (OSError, ValueError, AttributeError, IndexError):
        return None
    if pooling is None:
        return None
    similarity = "cosine" if len(modules) == 3 or settings.get("similarity_fn_name") != "dot" else "dot"
    prompts = settings.get("prompts") or {}
    digest = hashlib.sha1()
    for path in (folder / "modules.json", module_config, pooling_file, settings_file):
        if path is not None and path.is_file():
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return SentenceTransformersLayout(
        pooling,
        similarity,
        prompts.get("query", ""),
        prompts.get("passage", prompts.get("document", "")),
        digest.hexdigest()[:16],
    )


def sentence_transformers_variant(layout: SentenceTransformersLayout, similarity: str) -> str:
    """What besides the top-level weight files shapes the graph of a sentence-transformers folder."""
    return f"{graph_variant('sentence-transformers', layout.pooling, similarity)}:{layout.configs_digest}"


RETRIEVER_INFO = "retriever_info.json"


@dataclass(frozen=True)
class RetrieverInfo:
    """What odqa reads of an encoder folder's retriever_info.json (the rest are notes of its training)."""

    query_encoder: str | None = None  # the question encoder of a distilled passage encoder (its teacher)
    auto_int8: bool = False  # int8 vectors' recall measured: `auto` may pick int8 on CPUs without native bf16
    auto_int8_passages: bool = False  # the same, for passage vectors alone
    languages: list[str] | None = None  # those sharing one vector space (a multilingual encoder's); None: English

    def allows_int8(self, passages: bool = False) -> bool:
        """`int8_measured` of the encoder this file describes."""
        return self.auto_int8 or (passages and self.auto_int8_passages)


def retriever_info(name_or_path: str) -> RetrieverInfo:
    """The encoder folder's retriever_info.json (what odqa's trainers record of it), each value it gives held to
    its field's rule (a text, true or false) in one line naming the file; the defaults where it has none."""
    return read_retriever_info(resolve_model(name_or_path))


def read_retriever_info(folder: str | Path) -> RetrieverInfo:
    """`retriever_info` of an encoder already resolved to its folder (a hub name: the defaults)."""
    info = Path(folder) / RETRIEVER_INFO
    if not info.is_file():
        return RetrieverInfo()
    return RetrieverInfo(**load_model_settings(info, RetrieverInfo))


def encoder_languages(name_or_path: str) -> tuple[str, ...]:
    """The languages whose questions and passages share one vector space in this encoder: its retriever_info.json's
    `languages` (a multilingual encoder's), else English alone. A question in one of them is searched across
    languages in vectors of another."""
    if not name_or_path:
        return ()
    try:
        resolve_model(name_or_path)
    except (OSError, ValueError, OdqaError):  # a name that is no folder here (a hub name): nothing recorded
        return ("en",)
    languages = retriever_info(name_or_path).languages  # a damaged file or value: one line naming it
    return tuple(languages) if languages else ("en",)


def paired_query_encoder(name_or_path: str) -> str:
    """The question encoder a passage encoder was made for ("" if none): a student of `distill-encoder` writes
    its teacher's passage vectors, so its index is searched with the teacher's questions."""
    return retriever_info(name_or_path).query_encoder or ""


def int8_measured(name_or_path: str, passages: bool = False) -> bool:
    """Whether `auto` may run this encoder in int8 on a CPU without native bf16: only where its retriever_info.json
    says its int8 vectors' recall was measured (its model card gives the figures), as for the reader.
    `passages`: for encoding passages (an index build), which `"auto_int8_passages": true` allows alone where
    only int8 passage vectors were measured (questions searched in fp32)."""
    return retriever_info(name_or_path).allows_int8(passages)


@dataclass(frozen=True)
class EncoderSettings:
    """How one text encoder is loaded and run: the one place its settings are written, taken whole by the one
    loader (odqa.core.encoder_loading.load_text_encoder). The retrieval settings
    (retriever.settings.RetrievalConfig.question_encoder_settings) and the index spec (odqa.indexing.IndexSpec
    .encoder_settings) each make one. Unset values come from the model's files (a sentence-transformers folder's
    modules, prompts and length; DPR: cls and dot), else mean pooling, cosine similarity, no prefixes and
    DEFAULT_MAX_LENGTH."""

    name: str  # a model name or folder (odqa.core.models.resolve_model)
    max_length: int | None = None
    pooling: str | None = None
    similarity: str | None = None
    query_prefix: str | None = None
    passage_prefix: str | None = None
    precision: str = INFERENCE.precision  # of encode() only: training sets its own autocast
    runtime: str = INFERENCE.runtime
    device: str | None = None
    # encodes an index's passages: `auto` may run int8 where only passage int8 was measured (int8_measured)
    passages: bool = False


def same_encoder(name: str, other: str) -> bool:
    """Whether two encoder names name one model, as every check of recorded vectors compares them."""
    return name.rstrip("/").lower() == other.rstrip("/").lower()


def check_vectors_encoder(
    where: str, held: tuple[str, int], asked: tuple[str, int], fix: str, compare_names: bool = True
) -> None:
    """Refuse vectors searched or extended with another encoder than the one that made them, in one line ending
    with `fix`: `held` is the (encoder name, dimension) `where` records, `asked` those of the encoder used now
    (empty or 0: not known, not compared). The dimension first: it proves the mismatch whatever the names say;
    then the names, unless `compare_names` is False (a question encoder named apart from the passage encoder, as
    DPR's pair, need only give vectors of their dimension)."""
    held_name, held_dim = held
    name, dim = asked
    if dim and held_dim and dim != held_dim:
        raise IndexMismatchError(
            f"{where} holds {held_dim}-d vectors from encoder {held_name!r}, but encoder {name!r} gives {dim}-d "
            f"vectors; {fix}"
        )
    if compare_names and name and held_name and not same_encoder(name, held_name):
        raise IndexMismatchError(f"{where} was encoded with {held_name!r}, not {name!r}; {fix}")


def graph_variant(kind: str, pooling: str, similarity: str) -> str:
    """What besides the weights shapes an encoder's graph (pooling and normalisation are inside it)."""
    return f"{kind}-{pooling}-{similarity}"


def check_choice(name: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise OdqaError(f"encoder {name} must be one of {', '.join(allowed)}; got {value!r}")


def passage_text(title: str, text: str) -> str:
    """How a passage is shown to an encoder: its title, a separator, then its text (as DPR does)."""
    return f"{title} | {text}" if title else text


class EncodesTexts:
    """Encoding shared by the torch and the ONNX-only encoders; a subclass sets the attributes below and gives
    `device_type` and `_encode_batch(texts, plan, max_length) -> float32 vectors`."""

    name: str
    kind: str
    tokenizer: Any  # a transformers tokenizer
    max_length: int
    pooling: str
    similarity: str
    query_prefix: str
    passage_prefix: str
    precision: str  # of encode() only: training sets its own autocast
    runtime: str
    auto_int8: bool = False  # int8 measured within `auto`'s band: `auto` runs it in int8 (int8_measured)

    if TYPE_CHECKING:  # what each subclass gives (an attribute or a property)

        @property
        def dim(self) -> int: ...

        @property
        def device_type(self) -> str: ...

        def _encode_batch(self, texts: list, plan: InferencePlan, max_length: int | None) -> np.ndarray: ...

    @property
    def normalize(self) -> bool:
        return self.similarity == "cosine"

    def settings(self) -> dict:
        """What an index manifest records so that search encodes queries the same way."""
        return {
            "kind": self.kind,
            "pooling": self.pooling,
            "similarity": self.similarity,
            "query_prefix": self.query_prefix,
            "passage_prefix": self.passage_prefix,
        }

    def token_arrays(self, texts: Sequence[PassageInput], max_length: int | None = None) -> dict[str, np.ndarray]:
        batch = self._tokenize(texts, max_length, padding=True, return_tensors="np")
        return {k: v.astype(np.int64) for k, v in batch.items()}

    def token_counts(self, texts: Sequence[PassageInput], max_length: int | None = None) -> list[int]:
        """Tokens per text as encode() feeds them (truncated, special tokens included)."""
        ids = self._tokenize(texts, max_length, return_attention_mask=False, return_token_type_ids=False)["input_ids"]
        return [len(row) for row in ids]

    def _tokenize(self, texts: Sequence[PassageInput], max_length: int | None, **options):
        texts = list(texts)
        pairs = texts and isinstance(texts[0], tuple)
        if pairs and self.kind != "dpr":
            texts, pairs = [passage_text(*t) for t in cast("list[tuple[str, str]]", texts)], False
        pair_texts = cast("list[tuple[str, str]]", texts)  # read only where the texts are pairs
        args = ([t for t, _ in pair_texts], [x for _, x in pair_texts]) if pairs else (texts,)
        return self.tokenizer(
            *args, truncation="only_second" if pairs else True, max_length=max_length or self.max_length, **options
        )

    def encode_queries(self, texts: Sequence[str], **options) -> np.ndarray:
        """Questions, with the query prefix (e5: "query: "), in the question-time plan (plan_inference)."""
        return self.encode([self.query_prefix + t for t in texts], question_time=True, **options)

    def encode_passages(self, passages: Sequence[PassageInput], **options) -> np.ndarray:
        """Passages as texts or (title, text) pairs, with the passage prefix (e5: "passage: ")."""
        return self.encode(self.with_passage_prefix(passages), **options)

    def with_passage_prefix(self, passages: Sequence[PassageInput]) -> list[PassageInput]:
        """The passages as the model reads them: texts or titles behind the passage prefix (if any)."""
        prefix = self.passage_prefix
        if not prefix:
            return list(passages)
        return [(prefix + p[0], p[1]) if isinstance(p, tuple) else prefix + p for p in passages]

    def encode(
        self,
        texts: Sequence[PassageInput],
        batch_size: int = 64,
        sort_by_length: bool = True,
        progress: str = "",
        max_length: int | None = None,
        precision: str | None = None,
        on_batch: Callable[[int], None] | None = None,
        question_time: bool = False,
    ) -> np.ndarray:
        """Encode in batches, as given (no prefix); sorting by length first keeps padding (and time) low.
        `progress`: a bar label; `on_batch(n)`: called after each batch of n texts (an outer progress bar);
        `max_length`, `precision`: truncation and autocast for this call (default: the encoder's);
        `question_time`: the texts are questions (plan_inference)."""
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        # sorted by token count: characters per token vary too much between passages (numbers, names, markup),
        # and batches sorted by characters were padded to 1.4x their tokens on Wikipedia passages
        order = (
            np.argsort([-n for n in self.token_counts(texts, max_length)], kind="stable")
            if sort_by_length
            else np.arange(len(texts))
        )
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        plan = self.plan(precision, question_time=question_time)
        announce(f"encoder {self.name}", plan)
        starts = range(0, len(texts), batch_size)
        if progress:
            from tqdm import tqdm

            starts = tqdm(starts, desc=progress, unit="batch")
        for i in starts:
            idx = order[i : i + batch_size]
            vectors = np.asarray(self._encode_batch([texts[j] for j in idx], plan, max_length), dtype=np.float32)
            if self.normalize:  # again in fp32: autocast may have normalised in bf16
                vectors = vectors / np.maximum(np.linalg.norm(vectors, axis=-1, keepdims=True), 1e-12)
            out[idx] = vectors
            if on_batch is not None:
                on_batch(len(idx))
        return out

    def plan(self, precision: str | None = None, question_time: bool = False) -> InferencePlan:
        """The runtime and precision encode() uses (`precision`: this call's, default the encoder's;
        `question_time`: for questions rather than passages)."""
        settings = InferenceSettings(precision or self.precision, self.runtime)
        return plan_inference(self.device_type, settings, auto_int8=self.auto_int8, question_time=question_time)


class OnnxTextEncoder(EncodesTexts):
    """A text encoder that is only the cached ONNX graph of its weight files (pooling and normalisation inside)
    and its tokenizer; a plan the graph cannot run (another precision, torch) loads the torch encoder."""

    device_type = "cpu"
    dim: int

    def __init__(
        self,
        session: OnnxModel,
        tokenizer,
        kind: str,
        settings: EncoderSettings,
        load_torch: Callable[[], EncodesTexts],
        auto_int8: bool = False,
    ):
        """`settings`: made concrete (every value the model's or given; odqa.core.encoder_loading)."""
        self.session, self.tokenizer, self.name, self.kind = session, tokenizer, settings.name, kind
        self.max_length = settings.max_length or DEFAULT_MAX_LENGTH
        self.pooling, self.similarity = settings.pooling or "mean", settings.similarity or "cosine"
        self.query_prefix, self.passage_prefix = settings.query_prefix or "", settings.passage_prefix or ""
        self.precision, self.runtime = settings.precision, settings.runtime
        self.auto_int8 = auto_int8
        self._load_torch = load_torch
        self._torch: EncodesTexts | None = None
        size = session.session.get_outputs()[0].shape[-1]
        # an exported [CLS] pooling followed by normalisation can leave the width symbolic: ask the graph
        self.dim = size if isinstance(size, int) else int(session.run(self.token_arrays(["width"], 8))[0].shape[-1])

    def _encode_batch(self, texts: list, plan: InferencePlan, max_length: int | None) -> np.ndarray:
        if plan.runtime == "onnx" and (plan.precision == "int8") == self.session.path.name.endswith(".int8.onnx"):
            return self.session.run(self.token_arrays(texts, max_length))[0]
        if self._torch is None:
            self._torch = self._load_torch()
        return self._torch._encode_batch(texts, plan, max_length)
