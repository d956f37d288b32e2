"""Text encoders of three kinds, each used as its authors use it:

- a sentence-transformers folder (modules.json): its own modules (Transformer, Pooling, Dense, Normalize) and
  its query/passage prompts, run by sentence-transformers;
- a DPR encoder (DPRQuestionEncoder / DPRContextEncoder): its pooler output, passages as (title, text) pairs,
  dot-product similarity;
- any other transformers model: `pooling` mean (default) or cls, `similarity` cosine (default) or dot.

Query and passage prefixes (e5's "query: " / "passage: ") come from the folder's prompts or from settings.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers import AutoModel, AutoTokenizer

from odqa.core.device import autocast_for, pick_device
from odqa.core.errors import OdqaError
from odqa.core.logs import loggers_quieted
from odqa.core.model_files import read_model_json
from odqa.core.models import hub_options, resolve_model
from odqa.core.runtime import INFERENCE, InferencePlan, LoadedFrom, PerWeights, files_digest, int8_dynamic
from odqa.core.text_encoding import (  # noqa: F401
    DEFAULT_MAX_LENGTH,
    KIND_DEFAULTS,
    POOLINGS,
    SIMILARITIES,
    EncoderSettings,
    EncodesTexts,
    PassageInput,
    check_choice,
    encoder_kind,
    encoder_max_length,
    graph_variant,
    int8_measured,
    passage_text,
    read_retriever_info,
    sentence_transformers_layout,
    sentence_transformers_variant,
)


def mean_pool(token_embeddings: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    mask = attention_mask.unsqueeze(-1).to(token_embeddings.dtype)
    return (token_embeddings * mask).sum(1) / mask.sum(1).clamp(min=1e-9)


def _dpr_class(path: str):
    from transformers import DPRContextEncoder, DPRQuestionEncoder

    architectures = read_model_json(Path(path) / "config.json").get("architectures") or []
    return DPRContextEncoder if "DPRContextEncoder" in architectures else DPRQuestionEncoder


class TextEncoder(torch.nn.Module, EncodesTexts):
    """Encodes texts into vectors whose inner product is the model's similarity (cosine: L2-normalised)."""

    def __init__(
        self,
        model,
        tokenizer,
        name: str,
        max_length: int = DEFAULT_MAX_LENGTH,
        pooling: str = "mean",
        similarity: str = "cosine",
        query_prefix: str = "",
        passage_prefix: str = "",
        precision: str = INFERENCE.precision,
        kind: str = "transformers",
        modules: torch.nn.Module | None = None,
        runtime: str = INFERENCE.runtime,
    ):
        super().__init__()
        check_choice("pooling", pooling, POOLINGS)
        check_choice("similarity", similarity, SIMILARITIES)
        self.precision = precision  # of encode() only: training sets its own autocast
        self.runtime = runtime  # of encode() only (odqa.core.runtime.plan_inference)
        self._onnx = PerWeights()  # the ONNX Runtime session of the current weights
        self._int8_copy = PerWeights()  # a quantised copy of the current weights
        self._loaded_from: LoadedFrom | None = None  # of weights loaded from a local folder
        self.model = model  # the transformer (inside `modules` for a sentence-transformers model)
        self.modules_: Any = modules  # the whole SentenceTransformer, when the folder is one
        self.tokenizer = tokenizer
        self.name = name
        self.max_length = max_length
        self.pooling = pooling
        self.similarity = similarity
        self.query_prefix = query_prefix
        self.passage_prefix = passage_prefix
        self.kind = kind

    @classmethod
    def from_pretrained(cls, name_or_path: str, **settings: Any) -> TextEncoder:
        """`from_settings(EncoderSettings(name_or_path, **settings))`: the fields of
        odqa.core.text_encoding.EncoderSettings by name."""
        return cls.from_settings(EncoderSettings(name_or_path, **settings))

    @classmethod
    def from_settings(cls, settings: EncoderSettings, folder: str | None = None) -> TextEncoder:
        """The torch encoder `settings` describe (odqa.core.encoder_loading.load_text_encoder chooses it or the
        cached graph); `folder`: `settings.name` already resolved (odqa.core.models.resolve_model), where the
        caller has it. Unset settings come from the model (a sentence-transformers folder's modules and prompts;
        DPR: cls and dot), else mean pooling, cosine similarity, no prefixes."""
        name, pooling, similarity = settings.name, settings.pooling, settings.similarity
        path = folder or resolve_model(name)
        kind = encoder_kind(path)
        try:
            if kind == "sentence-transformers":
                encoder = cls._from_sentence_transformers(path, name, pooling, similarity)
            else:
                tokenizer = AutoTokenizer.from_pretrained(path, **hub_options(path))
                model_class = _dpr_class(path) if kind == "dpr" else AutoModel
                model = model_class.from_pretrained(path, **hub_options(path))
                defaults = KIND_DEFAULTS[kind]
                encoder = cls(
                    model,
                    tokenizer,
                    name=name,
                    kind=kind,
                    pooling=pooling or defaults["pooling"],
                    similarity=similarity or defaults["similarity"],
                )
        except (OSError, ValueError) as exc:
            raise OdqaError(
                f"cannot load encoder {name!r}: {exc.__class__.__name__}. "
                "Pass a local model folder, a model shipped under models/, or 'minilm'."
            ) from exc
        encoder.precision = settings.precision
        encoder.runtime = settings.runtime
        encoder.auto_int8 = read_retriever_info(path).allows_int8(settings.passages)
        if settings.max_length is not None:
            encoder.max_length = settings.max_length
        if settings.query_prefix is not None:
            encoder.query_prefix = settings.query_prefix
        if settings.passage_prefix is not None:
            encoder.passage_prefix = settings.passage_prefix
        return encoder._placed(settings.device, kind, path)

    def _placed(self, device: str | None, kind: str, folder: str) -> TextEncoder:
        """On `device`, in eval mode, with the name of its graph where its weights are a local folder's files."""
        # weights shipped in fp16 (models/encoder-multilingual) load as fp16 with transformers 5, and fp16
        # matmuls on a CPU run several times slower than fp32: compute in fp32, `precision` autocasts from there
        self.float()
        self.to(pick_device(device))
        self.eval()
        if kind == "sentence-transformers":
            layout = sentence_transformers_layout(folder)
            variant = sentence_transformers_variant(layout, self.similarity) if layout else None
        else:
            variant = graph_variant(kind, self.pooling, self.similarity)
        digest = files_digest(self.name, variant, folder) if variant else None
        if digest is not None:  # the graph then has the name load_text_encoder looks for
            self._loaded_from = LoadedFrom(digest, self)
        return self

    @classmethod
    def _from_sentence_transformers(cls, path: str, name: str, pooling: str | None, similarity: str | None):
        from sentence_transformers import SentenceTransformer
        from sentence_transformers.models import Normalize, Pooling

        with loggers_quieted("transformers", "sentence_transformers"):
            st = SentenceTransformer(path, device="cpu", local_files_only=True, model_kwargs={"dtype": torch.float32})
        modules = list(st)
        pooled = [m for m in modules if isinstance(m, Pooling)]
        own_pooling = "cls" if pooled and pooled[0].pooling_mode == "cls" else "mean"
        if pooling and pooled and pooling != own_pooling:
            raise OdqaError(
                f"{name} pools with {pooled[0].pooling_mode!r} (its modules.json); "
                "a sentence-transformers folder keeps its own pooling"
            )
        own_similarity = (
            "cosine"
            if any(isinstance(m, Normalize) for m in modules)
            else ("dot" if st.similarity_fn_name == "dot" else "cosine")
        )
        prompts = st.prompts or {}
        # neither sentence-transformers nor odqa calls a BERT-style pooler; where the checkpoint has none
        # (models/encoder-multilingual) transformers draws it at random, which changed the weights' fingerprint,
        # so every process built its ONNX graph again
        if getattr(modules[0].auto_model, "pooler", None) is not None:
            modules[0].auto_model.pooler = None
        return cls(
            modules[0].auto_model,
            st.tokenizer,
            name=name,
            kind="sentence-transformers",
            max_length=st.max_seq_length or DEFAULT_MAX_LENGTH,
            pooling=own_pooling,
            similarity=similarity or own_similarity,
            query_prefix=prompts.get("query", ""),
            passage_prefix=prompts.get("passage", prompts.get("document", "")),
            modules=st,
        )

    def save_pretrained(self, path: str | Path) -> None:
        if self.modules_ is not None:
            self.modules_.save(str(path))
            return
        self.model.save_pretrained(str(path))
        self.tokenizer.save_pretrained(str(path))

    @property
    def dim(self) -> int:
        if self.modules_ is not None:
            st = self.modules_  # sentence-transformers renamed the method in v5
            return int((getattr(st, "get_embedding_dimension", None) or st.get_sentence_embedding_dimension)())
        return int(self.model.config.hidden_size)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def device_type(self) -> str:
        return self.device.type

    def tokenize(self, texts: Sequence[PassageInput], max_length: int | None = None) -> dict[str, torch.Tensor]:
        return {k: torch.from_numpy(v).to(self.device) for k, v in self.token_arrays(texts, max_length).items()}

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        if self.modules_ is not None:
            vectors = self.modules_(dict(batch))["sentence_embedding"]
        elif self.kind == "dpr":
            vectors = self.model(**batch).pooler_output
        else:
            hidden = self.model(**batch).last_hidden_state
            vectors = hidden[:, 0] if self.pooling == "cls" else mean_pool(hidden, batch["attention_mask"])
        if self.normalize:
            vectors = torch.nn.functional.normalize(vectors, dim=-1)
        return vectors

    @torch.inference_mode()
    def _encode_batch(self, texts: list, plan: InferencePlan, max_length: int | None) -> np.ndarray:
        if plan.runtime == "onnx":
            return self._onnx_model(plan.precision == "int8").run(self.token_arrays(texts, max_length))[0]
        batch = self.tokenize(texts, max_length)
        if plan.precision == "int8":
            vectors = self._torch_int8()(batch)
        else:
            with autocast_for(self.device, plan.precision):
                vectors = self.forward(batch)
        return vectors.float().cpu().numpy()

    def _onnx_model(self, int8: bool):
        """ONNX Runtime session of the encoder with its pooling and normalisation (cached per weights)."""
        from odqa.core.runtime import OnnxModel

        def vectors(module, **inputs):
            return module(inputs)

        digest = self._loaded_from.digest_of(self) if self._loaded_from else None
        return self._onnx.get(
            self,
            int8,
            lambda: OnnxModel.for_module(
                self, "encoder", ("vectors",), int8, forward=vectors, transformer=self.model, weights_digest=digest
            ),
        )

    def _torch_int8(self) -> TextEncoder:
        """A dynamic int8 copy (one weight scale per output channel) for `--runtime torch --precision int8`."""
        return self._int8_copy.get(self, "int8", lambda: int8_dynamic(self._plain_copy()))

    def _plain_copy(self) -> TextEncoder:
        """A deep copy without the derived sessions and copies (an ONNX Runtime session does not copy)."""
        import copy

        caches = self._onnx, self._int8_copy
        self._onnx, self._int8_copy = PerWeights(), PerWeights()
        try:
            return copy.deepcopy(self)
        finally:
            self._onnx, self._int8_copy = caches


def iter_batches(items: Iterable, size: int):
    batch = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch
