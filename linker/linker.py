"""`Linker`: mention detection and entity disambiguation for a batch of questions in one encoder pass."""

from __future__ import annotations

import json
import logging
import warnings
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
from transformers import AutoConfig, AutoModel, AutoTokenizer

from linker.kb import KnowledgeBase
from linker.model import ELQConfig, ELQModel, enumerate_spans, word_masks
from odqa.core.device import autocast_for
from odqa.core.errors import OdqaError
from odqa.core.models import hub_options, resolve_model
from odqa.core.runtime import PerWeights, announce, int8_dynamic, plan_inference
from odqa.core.types import Mention

log = logging.getLogger(__name__)

LINKER_CONFIG = "linker_config.json"
WEIGHTS = "linker.safetensors"


def _no_init_weights():
    """transformers' context that skips weight initialisation (moved to transformers.initialization in v5)."""
    try:
        from transformers.initialization import no_init_weights
    except ImportError:  # transformers 4
        from transformers.modeling_utils import no_init_weights
    return no_init_weights()


class Linker:
    def __init__(
        self,
        model: ELQModel,
        tokenizer,
        kb: KnowledgeBase | None = None,
        mention_threshold: float | None = None,
        entity_threshold: float | None = None,
        device: str | None = None,
        max_spans: int = 24,
        precision: str = "auto",
        runtime: str = "auto",
    ):
        self.precision, self.runtime = precision, runtime  # of inference (odqa.core.runtime.plan_inference)
        self._onnx = PerWeights()  # the ONNX Runtime session of the current weights
        self._int8_copy = PerWeights()  # a quantised copy of the current weights
        self.model = model
        self.tokenizer = tokenizer
        self.config = model.config
        self.mention_threshold = self.config.mention_threshold if mention_threshold is None else mention_threshold
        self.entity_threshold = self.config.entity_threshold if entity_threshold is None else entity_threshold
        self.max_spans = max_spans
        self.device = torch.device(device or "cpu")
        self.model.to(self.device)
        self.model.eval()
        self.kb = None
        if kb is not None:
            self.set_kb(kb)

    # ---- construction -------------------------------------------------------------------------------------

    @classmethod
    def from_encoder(cls, name: str = "minilm", kb=None, config: ELQConfig | None = None, **kwargs) -> "Linker":
        """A fresh (untrained heads) linker on top of a pretrained encoder."""
        path = resolve_model(name)
        try:
            tokenizer = AutoTokenizer.from_pretrained(path, **hub_options(path))
            encoder = AutoModel.from_pretrained(path, **hub_options(path))
        except (OSError, ValueError) as exc:
            raise OdqaError(f"cannot load encoder {name!r}: {exc.__class__.__name__}") from exc
        config = config or ELQConfig(encoder=name)
        config.hidden_size = int(encoder.config.hidden_size)
        return cls(ELQModel(encoder, config), tokenizer, kb=kb, **kwargs)

    @classmethod
    def from_pretrained(cls, name_or_path: str | Path = "linker", kb=None, **kwargs) -> "Linker":
        path = Path(resolve_model(str(name_or_path)))
        if not (path / LINKER_CONFIG).is_file():
            raise OdqaError(
                f"{name_or_path}: not a trained linker (no {LINKER_CONFIG}); train one with `odqa train-linker` "
                "or use the shipped model 'linker'"
            )
        config = ELQConfig.from_dict(json.loads((path / LINKER_CONFIG).read_text()))
        tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
        with _no_init_weights():  # every weight is loaded below: a random initialisation would be thrown away
            encoder = AutoModel.from_config(AutoConfig.from_pretrained(str(path), local_files_only=True))
        model = ELQModel(encoder, config)
        from safetensors.torch import load_file

        state = load_file(str(path / WEIGHTS))
        missing, unexpected = model.load_state_dict({k: v.float() for k, v in state.items()}, strict=False)
        missing = [m for m in missing if not m.endswith("position_ids")]
        if missing or unexpected:
            raise OdqaError(f"{path}: linker weights do not fit the model (missing {missing[:3]}, unexpected {unexpected[:3]})")
        return cls(model, tokenizer, kb=kb, **kwargs)

    def save_pretrained(self, path: str | Path, half: bool = True, extra_config: dict | None = None) -> None:
        from safetensors.torch import save_file

        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        state = {k: (v.half() if half and v.is_floating_point() else v).contiguous().cpu() for k, v in self.model.state_dict().items()}
        state = {k: v for k, v in state.items() if not k.endswith("position_ids")}
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

    def tokenize(self, questions: Sequence[str]):
        return self.tokenizer(
            list(questions),
            padding=True,
            truncation=True,
            max_length=self.config.max_length,
            return_offsets_mapping=True,
            return_tensors="pt",
        )

    def span_candidates(self, questions: Sequence[str], batch) -> np.ndarray:
        """(row, first token, last token) of every candidate span: whole words, not starting or ending on
        punctuation, at most max_mention_tokens tokens."""
        word_ids = [batch.word_ids(i) for i in range(len(questions))]
        start, end = word_masks(word_ids)
        offsets = batch["offset_mapping"].numpy()
        for row, q in enumerate(questions):
            for t in range(start.shape[1]):
                if start[row, t] or end[row, t]:
                    s, e = offsets[row, t]
                    if not any(ch.isalnum() for ch in q[s:e]):
                        start[row, t] = end[row, t] = False
        return enumerate_spans(start, end, self.config.max_mention_tokens)

    @torch.inference_mode()
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
        batch = self.tokenize(questions)
        offsets = batch["offset_mapping"].numpy()
        for row, q in enumerate(questions):
            last = int(offsets[row, :, 1].max())
            if q[last:].strip() and len(batch.word_ids(row)) >= self.config.max_length:
                warnings.warn(
                    f"question truncated to {self.config.max_length} tokens for linking: {q[:60]!r}...", stacklevel=3
                )
        inputs = {k: v.to(self.device) for k, v in batch.items() if k != "offset_mapping"}
        hidden, scores = self._encode(inputs)
        spans = self.span_candidates(questions, batch)
        results: list[list[Mention]] = [[] for _ in questions]
        if len(spans) == 0:
            return results
        spans_t = torch.from_numpy(spans).to(self.device)
        p_mention = torch.sigmoid(self.model.mention_logits(scores, spans_t)).float().cpu().numpy()
        keep = []
        for row in range(len(questions)):
            rows = np.flatnonzero((spans[:, 0] == row) & (p_mention >= self.mention_threshold))
            rows = rows[np.argsort(-p_mention[rows])][: self.max_spans]
            keep.extend(rows.tolist())
        if not keep:
            return results
        keep = np.asarray(keep)
        spans, p_mention = spans[keep], p_mention[keep]
        span_vecs = self.model.span_vectors(hidden, torch.from_numpy(spans).to(self.device))
        texts = [questions[r][offsets[r, i, 0] : offsets[r, j, 1]] for r, i, j in spans]
        cand_rows = self.candidates(span_vecs.float().cpu().numpy(), texts)
        probs = self.entity_probabilities(span_vecs, texts, cand_rows)
        best = probs[:, :-1].argmax(1)
        for n, (row, i, j) in enumerate(spans):
            p_entity = float(probs[n, best[n]])
            joint = float(p_mention[n]) * p_entity
            if joint < self.entity_threshold or cand_rows[n, best[n]] < 0:
                continue
            start, end = int(offsets[row, i, 0]), int(offsets[row, j, 1])
            entity = self.kb.entity(int(cand_rows[n, best[n]]))
            results[row].append(
                Mention(start, end, questions[row][start:end], entity, float(p_mention[n]), p_entity, joint)
            )
        return [resolve_overlaps(m) for m in results] if resolve else results

    @property
    def plan(self):
        return plan_inference(self.device.type, self.precision, self.runtime)

    def _encode(self, inputs: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """Token vectors and mention scores of a batch, on the planned runtime and precision."""
        plan = self.plan
        announce("linker", plan)
        if plan.runtime == "onnx":
            from odqa.core.runtime import OnnxModel

            def encode(module, **named):
                return module.encode(**named)

            int8 = plan.precision == "int8"
            session = self._onnx.get(self.model, int8, lambda: OnnxModel.for_module(
                self.model, "linker", ("hidden", "scores"), int8, forward=encode, transformer=self.model.encoder))
            hidden, scores = session.run({k: v.cpu().numpy() for k, v in inputs.items()})
            return torch.from_numpy(hidden), torch.from_numpy(scores)
        if plan.precision == "int8":
            import copy

            copied = self._int8_copy.get(self.model, "int8", lambda: int8_dynamic(copy.deepcopy(self.model)))
            return copied.encode(**inputs)
        with autocast_for(self.device, plan.precision):
            hidden, scores = self.model.encode(**inputs)
        return hidden.float(), scores.float()

    def candidates(self, span_vecs: np.ndarray, texts: Sequence[str]) -> np.ndarray:
        """Dense top-K entities of each span plus the entities whose alias is the span's text; -1 pads."""
        k = min(self.config.candidates, len(self.kb))
        _, dense = self.kb.search(span_vecs, k)
        rows = []
        for n, text in enumerate(texts):
            merged = list(dict.fromkeys([int(r) for r in dense[n] if r >= 0] + self.kb.matcher.candidates(text)[: self.config.alias_candidates]))
            rows.append(merged)
        width = max(len(r) for r in rows)
        out = np.full((len(rows), width), -1, dtype=np.int64)
        for n, r in enumerate(rows):
            out[n, : len(r)] = r
        return out

    def entity_probabilities(self, span_vecs: torch.Tensor, texts: Sequence[str], cand_rows: np.ndarray) -> np.ndarray:
        """Softmax over each span's candidates plus NIL -> [N, C + 1] (padding gets probability 0)."""
        vectors = self.kb.vectors
        cand = torch.from_numpy(vectors[np.maximum(cand_rows, 0)]).to(span_vecs.device)
        feats = torch.from_numpy(self.kb.features(texts, cand_rows)).to(span_vecs.device)
        logits = self.model.entity_logits(span_vecs, cand, feats)
        pad = torch.from_numpy(np.concatenate([cand_rows < 0, np.zeros((len(cand_rows), 1), bool)], 1)).to(logits.device)
        logits = logits.masked_fill(pad, float("-inf"))
        return torch.softmax(logits.float(), dim=-1).cpu().numpy()


def resolve_overlaps(mentions: list[Mention]) -> list[Mention]:
    """Keep the best-scoring mention of each overlapping group (greedy by joint score), in text order."""
    chosen: list[Mention] = []
    for m in sorted(mentions, key=lambda m: -m.score):
        if all(m.end <= c.start or c.end <= m.start for c in chosen):
            chosen.append(m)
    return sorted(chosen, key=lambda m: m.start)
