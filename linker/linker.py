"""`Linker`: mention detection and entity disambiguation for a batch of questions in one encoder pass."""

from __future__ import annotations

import json
import logging
import re
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from odqa.core.device import autocast_for, device_type
from odqa.core.errors import OdqaError
from odqa.core.models import hub_options, resolve_model
from odqa.core.runtime import (
    INFERENCE,
    InferenceSettings,
    ModelFiles,
    OnnxModel,
    PerWeights,
    PretrainedRuntime,
    announce,
    cached_graph,
    fast_tokenizer,
    int8_dynamic,
    plan_inference,
)
from odqa.core.types import Mention
from odqa.indexes.cutting import korean_span
from odqa.linker.heads import LINKER_CONFIG, ELQConfig, LinkHeads, enumerate_spans, load_linker_config, word_masks
from odqa.linker.kb import KnowledgeBase

if TYPE_CHECKING:
    from odqa.linker.model import ELQModel

log = logging.getLogger(__name__)

_CJK = re.compile(r"[\u1100-\u11ff\u3040-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")
WEIGHTS = "linker.safetensors"


def _no_init_weights():
    """transformers' context that skips weight initialisation (moved to transformers.initialization in v5)."""
    try:
        from transformers.initialization import no_init_weights
    except ImportError:  # transformers 4
        from transformers.modeling_utils import no_init_weights
    return no_init_weights()


class Linker(PretrainedRuntime):
    def __init__(
        self,
        model: ELQModel | None,
        tokenizer,
        kb: KnowledgeBase | None = None,
        mention_threshold: float | None = None,
        entity_threshold: float | None = None,
        device: str | None = None,
        max_spans: int = 24,
        precision: str = INFERENCE.precision,
        runtime: str = INFERENCE.runtime,
        *,
        config: ELQConfig | None = None,
        session: OnnxModel | None = None,
        heads: LinkHeads | None = None,
        load_model: Callable[[], ELQModel] | None = None,
        weights_digest: str | None = None,
    ):
        """`model`: the torch ELQModel; or None, with `config`, `session` (the cached ONNX graph of its weight
        files, `weights_digest`), `heads` (its scoring heads, read from the files) and `load_model` (builds the
        module on first need: torch inference, training, saving)."""
        self.precision, self.runtime = precision, runtime  # of inference (odqa.core.runtime.plan_inference)
        self._int8_copy = PerWeights()  # a quantised copy of the current weights
        self.device = device or "cpu"
        super().__init__(None, load_model, session, weights_digest)
        self._file_heads = heads
        if model is not None:
            self.model = model
        self.tokenizer = tokenizer
        if config is None:
            assert model is not None  # given the model, or its config
            config = model.config
        self.config = config
        self.mention_threshold = self.config.mention_threshold if mention_threshold is None else mention_threshold
        self.entity_threshold = self.config.entity_threshold if entity_threshold is None else entity_threshold
        self.max_spans = max_spans
        self.kb: KnowledgeBase | None = None
        if kb is not None:
            self.set_kb(kb)

    def _prepared(self, module: ELQModel) -> ELQModel:
        return module.to(self.device).eval()

    # ---- construction -------------------------------------------------------------------------------------

    @classmethod
    def from_encoder(cls, name: str = "minilm", kb=None, config: ELQConfig | None = None, **kwargs) -> Linker:
        """A fresh (untrained heads) linker on top of a pretrained encoder."""
        from transformers import AutoModel, AutoTokenizer

        from odqa.linker.model import ELQModel

        path = resolve_model(name)
        try:
            tokenizer = AutoTokenizer.from_pretrained(path, **hub_options(path))
            encoder = AutoModel.from_pretrained(path, **hub_options(path)).float()  # trained in fp32 (fp16 files)
        except (OSError, ValueError) as exc:
            raise OdqaError(f"cannot load encoder {name!r}: {exc.__class__.__name__}") from exc
        config = config or ELQConfig(encoder=name)
        config.hidden_size = int(encoder.config.hidden_size)
        return cls(ELQModel(encoder, config), tokenizer, kb=kb, **kwargs)

    @classmethod
    def from_pretrained(cls, name_or_path: str | Path = "linker", kb=None, **kwargs) -> Linker:
        files = ModelFiles.resolve(str(name_or_path))
        path = Path(files.path)
        if not (path / LINKER_CONFIG).is_file():
            raise OdqaError(
                f"{name_or_path}: not a trained linker (no {LINKER_CONFIG}); train one with `odqa train-linker` "
                "or use the shipped model 'linker'"
            )
        config = load_linker_config(path / LINKER_CONFIG)
        inference = InferenceSettings(
            kwargs.get("precision", INFERENCE.precision), kwargs.get("runtime", INFERENCE.runtime)
        )
        plan = plan_inference(device_type(kwargs.get("device") or "cpu"), inference, question_time=True)
        session = cached_graph("linker", files, plan)

        def load_model():
            from safetensors.torch import load_file
            from transformers import AutoConfig, AutoModel

            from odqa.linker.model import ELQModel

            with _no_init_weights():  # every weight is loaded below: a random initialisation would be thrown away
                encoder = AutoModel.from_config(AutoConfig.from_pretrained(str(path), local_files_only=True))
            model = ELQModel(encoder, config)
            state = load_file(str(path / WEIGHTS))
            if config.base_model:
                state = {**base_state(config, path), **state}
            missing, unexpected = model.load_state_dict({k: v.float() for k, v in state.items()}, strict=False)
            missing = [m for m in missing if not m.endswith("position_ids")]
            unexpected = [u for u in unexpected if not u.endswith("position_ids")]
            if missing or unexpected:
                raise OdqaError(
                    f"{path}: linker weights do not fit the model (missing {missing[:3]}, unexpected {unexpected[:3]})"
                )
            return model

        digest = files.digest
        if session is not None and config.base_model:
            check_base(config, path)  # the graph holds the base's weights: used only while they are the same
        if session is not None:
            return cls(
                None,
                fast_tokenizer(path),
                kb=kb,
                config=config,
                session=session,
                heads=LinkHeads.from_file(path / WEIGHTS),
                load_model=load_model,
                weights_digest=digest,
                **kwargs,
            )
        from transformers import AutoTokenizer

        linker = cls(
            None,
            AutoTokenizer.from_pretrained(str(path), local_files_only=True),
            kb=kb,
            config=config,
            load_model=load_model,
            weights_digest=digest,
            **kwargs,
        )
        linker.model  # noqa: B018 -- loaded now, so that weights that do not fit fail here, not at the first link
        return linker

    def save_pretrained(self, path: str | Path, half: bool = True, extra_config: dict | None = None) -> None:
        from safetensors.torch import save_file

        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        state = {
            k: (v.half() if half and v.is_floating_point() else v).contiguous().cpu()
            for k, v in self.model.state_dict().items()
        }
        state = {k: v for k, v in state.items() if not k.endswith("position_ids")}
        if self.config.base_model:
            from odqa.core.models import model_fingerprint

            self.config.base_weights = model_fingerprint(self.config.base_model)
            base = base_state(self.config, path, checked=False)
            state = {k: v for k, v in state.items() if k not in base or not _same(v, base[k])}
        save_file(state, str(path / WEIGHTS), metadata={"format": "pt"})
        self.model.encoder.config.save_pretrained(str(path))
        self.tokenizer.save_pretrained(str(path))
        data = self.config.to_dict()
        data.update(extra_config or {})
        (path / LINKER_CONFIG).write_text(json.dumps(data, indent=2))

    def set_kb(self, kb) -> None:
        if isinstance(kb, (str, Path)):
            kb = KnowledgeBase.load(kb)
        kb.check_encoder(self.config.entity_encoder, self.config.entity_dim)
        self.kb = kb

    # ---- inference -----------------------------------------------------------------------------------------

    def tokenize(self, questions: Sequence[str], return_tensors: str = "pt"):
        """Token ids (torch tensors for training; "np" for inference, which needs no torch) and offsets."""
        return self.tokenizer(
            list(questions),
            padding=True,
            truncation=True,
            max_length=self.config.max_length,
            return_offsets_mapping=True,
            return_tensors=return_tensors,
        )

    def span_candidates(self, questions: Sequence[str], batch) -> np.ndarray:
        """(row, first token, last token) of every candidate span: whole words, not starting or ending on
        punctuation, at most max_mention_tokens tokens."""
        word_ids = [batch.word_ids(i) for i in range(len(questions))]
        offsets = np.asarray(batch["offset_mapping"])
        letter_by_letter = [
            [bool(_CJK.search(q[s:e])) for s, e in offsets[row].tolist()] for row, q in enumerate(questions)
        ]
        start, end = word_masks(word_ids, letter_by_letter)
        for row, q in enumerate(questions):
            for t in range(start.shape[1]):
                if start[row, t] or end[row, t]:
                    s, e = offsets[row, t]
                    if not any(ch.isalnum() for ch in q[s:e]):
                        start[row, t] = end[row, t] = False
        return enumerate_spans(start, end, self.config.max_mention_tokens)

    def link(self, questions: Sequence[str], batch_size: int = 32) -> list[list[Mention]]:
        if self.kb is None:
            raise OdqaError("the linker has no knowledge base: pass kb=... (build one with `odqa build-kb`)")
        questions = ["" if q is None else str(q) for q in questions]
        out: list[list[Mention]] = [[] for _ in questions]
        todo = [i for i, q in enumerate(questions) if q.strip()]
        for b in range(0, len(todo), batch_size):
            idx = todo[b : b + batch_size]
            for i, mentions in zip(idx, self._link_batch([questions[i] for i in idx])):
                out[i] = mentions
        return out

    def _link_batch(self, questions: list[str], resolve: bool = True) -> list[list[Mention]]:
        batch = self.tokenize(questions, return_tensors="np")
        offsets = batch["offset_mapping"]
        for row, q in enumerate(questions):
            last = int(offsets[row, :, 1].max())
            if q[last:].strip() and len(batch.word_ids(row)) >= self.config.max_length:
                warnings.warn(
                    f"question truncated to {self.config.max_length} tokens for linking: {q[:60]!r}...", stacklevel=3
                )
        hidden, scores = self._encode({k: v for k, v in batch.items() if k != "offset_mapping"})
        spans = self.span_candidates(questions, batch)
        results: list[list[Mention]] = [[] for _ in questions]
        if len(spans) == 0:
            return results
        heads = self._heads()
        p_mention = 0.5 * (1.0 + np.tanh(0.5 * heads.mention_logits(scores, spans)))  # the sigmoid, never overflowing
        keep = []
        for row in range(len(questions)):
            rows = np.flatnonzero((spans[:, 0] == row) & (p_mention >= self.mention_threshold))
            rows = rows[np.argsort(-p_mention[rows])][: self.max_spans]
            keep.extend(rows.tolist())
        if not keep:
            return results
        assert self.kb is not None  # linking needs the knowledge base (link() refuses a linker without one)
        kept = np.asarray(keep)
        spans, p_mention = spans[kept], p_mention[kept]
        span_vecs = heads.span_vectors(hidden, spans)
        texts = [questions[r][offsets[r, i, 0] : offsets[r, j, 1]] for r, i, j in spans]
        cand_rows = self.candidates(span_vecs, texts)
        probs = self.entity_probabilities(span_vecs, texts, cand_rows, heads)
        best = probs[:, :-1].argmax(1)
        for n, (row, i, j) in enumerate(spans):
            p_entity = float(probs[n, best[n]])
            joint = float(p_mention[n]) * p_entity
            if joint < self.entity_threshold or cand_rows[n, best[n]] < 0:
                continue
            bounds = mention_bounds(questions[row], int(offsets[row, i, 0]), int(offsets[row, j, 1]))
            if bounds is None:
                continue
            start, end = bounds
            entity = self.kb.entity(int(cand_rows[n, best[n]]))
            results[row].append(
                Mention(start, end, questions[row][start:end], entity, float(p_mention[n]), p_entity, joint)
            )
        return [resolve_overlaps(m) for m in results] if resolve else results

    def disambiguate(self, question: str, spans: Sequence[tuple[int, int]]) -> list[Mention | None]:
        """The best entity of each given character span of `question` (entity disambiguation with the mentions
        known, as BLINK does), None for a span no token covers or whose best candidate is NIL. Scores: the
        mention's own (however low) and p(entity | mention)."""
        if self.kb is None:
            raise OdqaError("the linker has no knowledge base: pass kb=... (build one with `odqa build-kb`)")
        batch = self.tokenize([question], return_tensors="np")
        offsets = batch["offset_mapping"][0]
        hidden, scores = self._encode({k: v for k, v in batch.items() if k != "offset_mapping"})
        located = []
        for start, end in spans:
            tokens = [t for t, (s, e) in enumerate(offsets.tolist()) if e > s and s < end and start < e]
            located.append((0, tokens[0], tokens[-1]) if tokens else None)
        found = [span for span in located if span is not None]
        out: list[Mention | None] = [None] * len(spans)
        if not found:
            return out
        heads = self._heads()
        token_spans = np.asarray(found, dtype=np.int64)
        p_mention = 0.5 * (1.0 + np.tanh(0.5 * heads.mention_logits(scores, token_spans)))
        span_vecs = heads.span_vectors(hidden, token_spans)
        texts = [question[start:end] for (start, end), span in zip(spans, located) if span is not None]
        cand_rows = self.candidates(span_vecs, texts)
        probs = self.entity_probabilities(span_vecs, texts, cand_rows, heads)
        best = probs[:, :-1].argmax(1)
        n = 0
        for i, ((start, end), span) in enumerate(zip(spans, located)):
            if span is None:
                continue
            p_entity = float(probs[n, best[n]])
            if cand_rows[n, best[n]] >= 0 and p_entity >= float(probs[n, -1]):
                entity = self.kb.entity(int(cand_rows[n, best[n]]))
                out[i] = Mention(
                    start,
                    end,
                    question[start:end],
                    entity,
                    float(p_mention[n]),
                    p_entity,
                    float(p_mention[n]) * p_entity,
                )
            n += 1
        return out

    @property
    def plan(self):
        return plan_inference(
            device_type(self.device), InferenceSettings(self.precision, self.runtime), question_time=True
        )

    def _heads(self) -> LinkHeads:
        """The scoring heads: read from the files while no torch module was built, else the module's own (their
        current values: the linker may be training)."""
        if self._model is None:
            assert self._file_heads is not None  # a linker made without its module was given its heads
            return self._file_heads
        return LinkHeads.from_model(self._model)

    def _onnx_model(self, int8: bool) -> OnnxModel:
        """The ONNX Runtime session of the current weights (built and cached on first use)."""

        def encode(module, **named):
            return module.encode(**named)

        return self.onnx_session(
            int8,
            lambda module, digest: OnnxModel.for_module(
                module,
                "linker",
                ("hidden", "scores"),
                int8,
                forward=encode,
                transformer=module.encoder,
                weights_digest=digest,
            ),
        )

    def _encode(self, inputs: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """Token vectors and mention scores (float32) of a batch, on the planned runtime and precision."""
        plan = self.plan
        announce("linker", plan)
        if plan.runtime == "onnx":
            hidden, scores = self._onnx_model(plan.precision == "int8").run(inputs)
            return hidden, scores
        import torch

        batch = {k: torch.from_numpy(v).to(self.device) for k, v in inputs.items()}
        with torch.inference_mode():
            if plan.precision == "int8":
                import copy

                copied = self._int8_copy.get(self.model, "int8", lambda: int8_dynamic(copy.deepcopy(self.model)))
                hidden, scores = copied.encode(**batch)
            else:
                with autocast_for(torch.device(self.device), plan.precision):
                    hidden, scores = self.model.encode(**batch)
        return hidden.float().cpu().numpy(), scores.float().cpu().numpy()

    def candidates(self, span_vecs: np.ndarray, texts: Sequence[str]) -> np.ndarray:
        """Dense top-K entities of each span plus the entities whose alias is the span's text; -1 pads."""
        assert self.kb is not None  # linking needs the knowledge base (link() refuses a linker without one)
        k = min(self.config.candidates, len(self.kb))
        _, dense = self.kb.search(span_vecs, k)
        rows = []
        for n, text in enumerate(texts):
            merged = list(
                dict.fromkeys(
                    [int(r) for r in dense[n] if r >= 0]
                    + self.kb.matcher.candidates(text)[: self.config.alias_candidates]
                )
            )
            rows.append(merged)
        width = max(len(r) for r in rows)
        out = np.full((len(rows), width), -1, dtype=np.int64)
        for n, r in enumerate(rows):
            out[n, : len(r)] = r
        return out

    def entity_probabilities(
        self, span_vecs: np.ndarray, texts: Sequence[str], cand_rows: np.ndarray, heads: LinkHeads | None = None
    ) -> np.ndarray:
        """Softmax over each span's candidates plus NIL -> [N, C + 1] (padding gets probability 0)."""
        assert self.kb is not None  # linking needs the knowledge base (link() refuses a linker without one)
        cand = self.kb.vectors_of(np.maximum(cand_rows, 0))
        logits = (heads or self._heads()).entity_logits(span_vecs, cand, self.kb.features(texts, cand_rows))
        pad = np.concatenate([cand_rows < 0, np.zeros((len(cand_rows), 1), bool)], 1)
        logits = np.where(pad, -np.inf, logits)
        logits = np.exp(logits - logits.max(axis=-1, keepdims=True))
        return logits / logits.sum(axis=-1, keepdims=True)


def check_base(config: ELQConfig, path: Path) -> None:
    """Refuse in one line a linker whose base model installed here is not the one it was trained from."""
    from odqa.core.models import model_fingerprint

    if model_fingerprint(config.base_model) != config.base_weights:
        raise OdqaError(
            f"{path}: the linker reads its frozen weights from {config.base_model!r}, but the one installed here is "
            f"another version; install the {config.base_model} it was trained with"
        )


def base_state(config: ELQConfig, path: Path, checked: bool = True) -> dict:
    """The base model's weights under the linker's names (`encoder.` + the base's own), checked against the
    fingerprint the linker recorded unless `checked` is False (while saving, when it is being recorded)."""
    from safetensors.torch import load_file

    if checked:
        check_base(config, path)
    state: dict = {}
    for file in sorted(Path(resolve_model(config.base_model)).glob("*.safetensors")):
        state.update({f"encoder.{key}": tensor for key, tensor in load_file(str(file)).items()})
    if not state:
        raise OdqaError(f"base model {config.base_model!r} of {path} has no .safetensors weights")
    return state


def _same(saved, base) -> bool:
    """A weight left as the base has it (compared at the precision the linker saves)."""
    return saved.shape == base.shape and bool((saved == base.to(saved.dtype)).all())


def mention_bounds(question: str, start: int, end: int) -> tuple[int, int] | None:
    """A mention's characters as a reader would mark them: without the space a SentencePiece token carries before
    its word, nor the Korean particle glued to the name's last piece (아인슈타인은 -> 아인슈타인); None for a span
    of nothing but a word's particles and endings (the 은 of 정도전은), which names nothing."""
    while start < end and question[start].isspace():
        start += 1
    return korean_span(question, start, end)


def resolve_overlaps(mentions: list[Mention]) -> list[Mention]:
    """Keep the best-scoring mention of each overlapping group (greedy by joint score), in text order."""
    chosen: list[Mention] = []
    for m in sorted(mentions, key=lambda m: -m.score):
        if all(m.end <= c.start or c.end <= m.start for c in chosen):
            chosen.append(m)
    return sorted(chosen, key=lambda m: m.start)
