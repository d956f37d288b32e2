"""The extractive reader: any Hugging Face extractive-QA checkpoint, read over one or many passages."""

from __future__ import annotations

import contextlib
import copy
import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from odqa.core.device import autocast_for, device_type, pick_device
from odqa.core.errors import OdqaError
from odqa.core.model_files import read_model_json
from odqa.core.models import hub_options
from odqa.core.runtime import (
    InferencePlan,
    InferenceSettings,
    ModelFiles,
    OnnxModel,
    PretrainedRuntime,
    announce,
    cached_graph,
    fast_tokenizer,
    int8_dynamic,
    pad_batch,
    plan_inference,
)
from odqa.core.settings import value_refusal
from odqa.core.types import Answer, Passage
from odqa.reader.calibration import CALIBRATION_FILE, Calibration
from odqa.reader.decode import AggregatedAnswer, PassageSpan, aggregate, decode_passage
from odqa.reader.entity_marks import Subjects, is_subject, marked_question
from odqa.reader.features import require_fast, tokenize_windows
from odqa.reader.settings import (
    CHECKPOINT_OWN_SETTINGS,
    DEFAULT_READER,
    READER_CONFIG,
    SHIPPED_READERS,
    ReaderSettings,
    load_reader_config,
    resolve_reader,
    with_checkpoint_record,
)

if TYPE_CHECKING:
    import torch

    from odqa.reader.focus import Focus


def _check_qa_architectures(name: str, architectures: list[str] | None) -> None:
    if not any(a.endswith("ForQuestionAnswering") for a in architectures or []):
        raise OdqaError(
            f"{name!r} is not an extractive question-answering checkpoint (architectures: "
            f"{', '.join(architectures or ['none recorded'])}); train one "
            "with `odqa train-reader` or pass a *ForQuestionAnswering model"
        )


@dataclass
class ReadState:
    """One question's reading: its non-empty passages (`keep`, in the order given) and the decoded ones so far
    (`Reader.read_many` fills it; `Reader.rank` and `Reader.decided` judge it)."""

    question: str
    passages: list[Passage]
    keep: list[int]  # indexes of the passages with text
    texts: list[str]  # their texts
    scores: list[float] | None  # their retrieval scores
    top_n: int
    read: list[tuple[list[PassageSpan], float]]  # (spans, null score) of keep[0], keep[1], ...
    subjects: Subjects = None  # the article keys of the question's linked entities (entity marks)

    @classmethod
    def make(
        cls,
        question: str,
        passages: list[Passage],
        retrieval_scores: list[float] | None,
        top_n: int,
        subjects: Subjects = None,
    ) -> ReadState:
        if not isinstance(question, str) or not question.strip():
            raise OdqaError("the question is empty")
        if not passages:
            raise OdqaError("no passages to read (the passage list is empty)")
        if retrieval_scores is not None and len(retrieval_scores) != len(passages):
            raise OdqaError(f"{len(retrieval_scores)} retrieval scores for {len(passages)} passages")
        if top_n <= 0:
            raise OdqaError(f"top_n must be positive, got {top_n}")
        keep = [i for i, p in enumerate(passages) if (p.text or "").strip()]
        scores = [float(retrieval_scores[i]) for i in keep] if retrieval_scores is not None else None
        return cls(question, passages, keep, [passages[i].text for i in keep], scores, top_n, [], subjects)

    def about_subject(self, n: int) -> bool:
        """Whether the job's n-th passage with text is the article of an entity linked in its question."""
        return is_subject(self.passages[self.keep[n]].title, self.subjects)

    def question_for(self, n: int, entity_marks: bool) -> str:
        """The question as the reader reads it beside the job's n-th passage with text."""
        if not entity_marks:
            return self.question
        return marked_question(self.question, self.passages[self.keep[n]].title, self.subjects)


class Reader(PretrainedRuntime):
    """Reads passages and returns answer spans with character offsets into each passage's text."""

    def __init__(
        self,
        model,
        tokenizer,
        settings: ReaderSettings | None = None,
        name: str = "",
        calibration: Calibration | None = None,
        session: OnnxModel | None = None,
        load_model: Callable[[], Any] | None = None,
        weights_digest: str | None = None,
    ):
        """`model`: the torch module; or None, with `load_model` to build it on first need (torch inference,
        training, saving) and `session`, the cached ONNX graph of its weight files (`weights_digest`, which
        names the graph while the loaded weights stay unchanged), which reads without it."""
        require_fast(tokenizer)
        super().__init__(model.eval() if model is not None else None, load_model, session, weights_digest)
        self.tokenizer = tokenizer
        self.settings = with_checkpoint_record(settings or ReaderSettings(), {})  # a number for max_answer_tokens
        self.name = name
        self.calibration = calibration or Calibration()
        self._quantized = False
        self._bf16_copy: tuple[object, torch.nn.Module] | None = None  # (the model it copies, the copy)
        self.passages_read = 0  # passages decoded so far (early stopping skips some)
        self._focus: Focus | None = None  # of settings.focus_words, made on first use

    def _prepared(self, module):
        return module  # as given: a caller's module (a quantised copy, one in training) keeps its mode

    # ---------------------------------------------------------------- loading / saving
    @classmethod
    def from_pretrained(
        cls,
        name_or_path: str = DEFAULT_READER,
        device: str | None = None,
        calibration: str | Path | None = None,
        **overrides,
    ) -> Reader:
        """Load an extractive-QA checkpoint: a name (`reader` = the shipped models/reader), a folder, or a hub
        name (`auto`: the English reader). ReaderSettings' defaults, overridden by
        keyword; what the checkpoint records about itself (its reader_config.json) applies unless a keyword sets
        it; so does its calibration.json unless `calibration` names another file."""
        settings = ReaderSettings(model=resolve_reader(name_or_path)[0], calibration=str(calibration or ""))
        for key, value in overrides.items():
            if not hasattr(settings, key):
                raise OdqaError(f"unknown reader setting {key!r}")
            if value is None and key in CHECKPOINT_OWN_SETTINGS:
                continue
            refused = value_refusal(ReaderSettings, key, value)
            if refused:
                raise OdqaError(f"reader setting {key} = {value!r} {refused[0]}; give {refused[1]}")
            setattr(settings, key, value)
        given = tuple(k for k, v in overrides.items() if not (v is None and k in CHECKPOINT_OWN_SETTINGS))
        return cls.load(settings, device=device, explicit=given)

    @classmethod
    def load(cls, settings: ReaderSettings, device: str | None = None, explicit: Sequence[str] = ()) -> Reader:
        """The extractive-QA checkpoint `settings.model` names (a concrete name: reader.registry.build_reader
        resolves `auto`), read with `settings` overlaid with what it records about itself (except `explicit`
        keys: reader.settings.with_checkpoint_record)."""
        name = str(settings.model).strip()
        if not name:
            raise OdqaError("reader model name is empty; pass 'reader' or a checkpoint path")
        files = ModelFiles.resolve(name)
        path = files.path
        if name in SHIPPED_READERS and not (Path(path) / "config.json").exists():
            raise OdqaError(
                f"the shipped reader models/{name} is missing; train one with `odqa train-reader` "
                "(README, Train the models) or pass --model PATH_OR_NAME"
            )
        cfg_file = Path(path) / READER_CONFIG
        recorded = load_reader_config(cfg_file) if cfg_file.is_file() else {}
        settings = with_checkpoint_record(settings, recorded, explicit)
        cal = Calibration.load(settings.calibration) if settings.calibration else Calibration.for_model(path)
        plan = plan_inference(
            device_type(device), InferenceSettings(settings.precision, settings.runtime), auto_int8=settings.auto_int8
        )
        session = cached_graph("reader", files, plan)
        if session is not None:  # a local folder: its config.json says what it is, without transformers' torch
            _check_qa_architectures(name, read_model_json(Path(path) / "config.json").get("architectures"))
            tokenizer = fast_tokenizer(path)
        else:
            tokenizer = _load_tokenizer(name, path)

        def load_model():
            import torch
            from transformers import AutoModelForQuestionAnswering

            dev = pick_device(device)
            try:
                # shipped weights are fp16; compute in fp32 on CPU (fp16 matmuls there are slow and lossy)
                model = AutoModelForQuestionAnswering.from_pretrained(
                    path, dtype=torch.float32 if dev.type == "cpu" else torch.float16, **hub_options(path)
                )
            except (OSError, ValueError) as exc:
                raise OdqaError(f"cannot load reader {name!r}: {exc}") from exc
            return model.to(dev)

        reader = cls(
            None,
            tokenizer,
            settings,
            name=name,
            calibration=cal,
            session=session,
            load_model=load_model,
            weights_digest=files.digest,
        )
        if session is None:
            reader.model  # noqa: B018 -- loaded now, so that a broken checkpoint fails here, not at the first read
        return reader

    def save_pretrained(self, path: str | Path, fp16: bool = False) -> None:
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        model = self.model
        if fp16:
            import copy

            model = copy.deepcopy(self.model).half()
        model.save_pretrained(str(path), safe_serialization=True)
        self.tokenizer.save_pretrained(str(path))
        (path / READER_CONFIG).write_text(json.dumps(asdict(self.settings), indent=2) + "\n")
        if self.calibration.fitted:
            self.calibration.save(path / CALIBRATION_FILE)

    def quantize_int8(self) -> Reader:
        """Dynamic int8 quantisation of the linear layers (CPU inference), one weight scale per output channel:
        on the 4,557 held-out SQuAD v1.1 dev questions F1 drops 2.6 from fp32 where one scale per tensor drops 5.7,
        at the same speed."""
        self.model = int8_dynamic(self.model)
        self._quantized = True
        self.settings.precision = "fp32"  # the int8 kernels take fp32 activations; autocast would undo them
        return self

    @property
    def languages(self) -> list[str] | None:
        return self.settings.languages

    @property
    def no_answer_threshold(self) -> float | None:
        return self.settings.no_answer_threshold

    @property
    def device(self) -> torch.device:
        import torch

        try:
            return next(self.model.parameters()).device
        except StopIteration:  # pragma: no cover
            return torch.device("cpu")

    @property
    def device_type(self) -> str:
        """cpu | cuda, without building the torch module (a reader made from a cached graph runs on the CPU)."""
        return "cpu" if self._model is None else self.device.type

    # ---------------------------------------------------------------- inference
    @property
    def inference(self) -> InferenceSettings:
        """What `plan` makes concrete: the settings' precision and runtime."""
        return InferenceSettings(self.settings.precision, self.settings.runtime)

    @property
    def plan(self) -> InferencePlan:
        """The runtime and precision reads use now (from `settings`, the device and the CPU)."""
        if self._quantized:
            return InferencePlan("torch", "int8", "quantize_int8()")
        return plan_inference(self.device_type, self.inference, auto_int8=self.settings.auto_int8)

    def _onnx_model(self, int8: bool):
        """The ONNX Runtime session of the current weights (built and cached on first use)."""
        return self.onnx_session(
            int8,
            lambda module, digest: OnnxModel.for_module(
                module, "reader", ("start_logits", "end_logits"), int8, weights_digest=digest
            ),
        )

    def _forward_model(self, precision: str):
        """The module for a forward pass and its autocast context.

        bf16 on a CPU runs a bf16-weight copy of the model with eager attention instead of autocasting the fp32
        weights on every call: reading the top 10 passages takes 145 ms instead of 166 ms on 2 AVX512-BF16
        cores, with equal F1 (models/reader/README.md, Speed); PyTorch's fused attention is the slower
        one for bf16 on CPU. The fp32 weights are kept, so switching `settings.precision` back stays exact. The
        copy is made at the first bf16 read of each model object; weights changed in place after it are not seen
        (training works on the Hugging Face model, never through a Reader)."""
        device = self.device
        if device.type != "cpu" or precision != "bf16" or self._quantized:
            return self.model, autocast_for(device, precision)
        if self._bf16_copy is None or self._bf16_copy[0] is not self.model:
            import torch

            bf16 = copy.deepcopy(self.model).to(torch.bfloat16).eval()
            bf16.set_attn_implementation("eager")
            self._bf16_copy = (self.model, bf16)
        return self._bf16_copy[1], contextlib.nullcontext()

    def logits(
        self,
        questions: Sequence[str],
        contexts: Sequence[str],
        separate_questions: bool = False,
        groups: Sequence[str] | None = None,
    ):
        """Windows of each (question, context) pair and their start/end logits, batched across pairs. With
        `separate_questions`, a forward batch never holds windows of two different questions (`groups`: the
        question each pair belongs to, where the text read differs per passage, as with entity marks), so a
        question's logits do not depend on what else is read with it: int8 quantises each batch's activations with
        one scale, which other questions' windows (and their padding) would move."""
        s = self.settings
        w = tokenize_windows(self.tokenizer, questions, contexts, s.max_length, s.stride, s.max_query_tokens)
        ids = w.encoding["input_ids"]
        tts = w.encoding.get("token_type_ids")
        starts: list[np.ndarray] = [None] * len(ids)  # type: ignore[list-item]
        ends: list[np.ndarray] = [None] * len(ids)  # type: ignore[list-item]
        order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))  # less padding per batch
        pad = self.tokenizer.pad_token_id or 0
        plan = self.plan
        announce("reader", plan)
        if plan.runtime == "onnx":
            session = self._onnx_model(plan.precision == "int8")
        else:
            import torch

            if plan.precision == "int8" and not self._quantized:
                self.quantize_int8()
            model, context = self._forward_model("fp32" if plan.precision == "int8" else plan.precision)
            dev = self.device
        owner = groups if groups is not None else questions
        if separate_questions:
            order.sort(key=lambda i: owner[w.sample[i]])  # stable: longest first within each question
        batches: list[list[int]] = []
        for i in order:
            if (
                batches
                and len(batches[-1]) < max(1, s.batch_size)
                and not (separate_questions and owner[w.sample[batches[-1][0]]] != owner[w.sample[i]])
            ):
                batches[-1].append(i)
            else:
                batches.append([i])
        for idx in batches:
            feeds = pad_batch([ids[i] for i in idx], pad, [tts[i] for i in idx] if tts is not None else None)
            if plan.runtime == "onnx":
                sl, el = session.run(feeds)
            else:
                batch = {
                    k: torch.from_numpy(v).to(dev) for k, v in feeds.items() if k != "token_type_ids" or tts is not None
                }
                with torch.inference_mode(), context:
                    out = model(**batch)
                sl = out.start_logits.float().cpu().numpy()
                el = out.end_logits.float().cpu().numpy()
            for r, i in enumerate(idx):
                # padding positions are beyond context_end, so decoding never looks at them
                starts[i], ends[i] = sl[r, : len(ids[i])], el[r, : len(ids[i])]
        return w, starts, ends

    def read(
        self,
        question: str,
        passages: list[Passage],
        retrieval_scores: list[float] | None = None,
        top_n: int | None = None,
        no_answer_threshold: float | None | str = "default",
        *,
        subjects: Subjects = None,
    ) -> list[Answer]:
        """Answers to `question` from `passages`, best first (at most `top_n`; None: `settings.top_n`).
        `retrieval_scores` (one per passage) enter the score with the configured weight. When no span beats its
        passage's no-answer score by the threshold, the best guesses are still returned, each with its (low)
        calibrated probability and `confident` False; empty only when the passages hold no span at all.
        `subjects`: the article keys of the question's linked entities (`entity_marks.subjects_of(mentions)`),
        which a reader trained with entity marks reads beside each passage's title."""
        scores = [retrieval_scores] if retrieval_scores is not None else None
        return self.read_many(
            [question], [passages], scores, top_n, subjects=[subjects], no_answer_threshold=no_answer_threshold
        )[0]

    def read_many(
        self,
        questions: Sequence[str],
        passages: Sequence[list[Passage]],
        retrieval_scores: Sequence[list[float]] | None = None,
        top_n: int | None = None,
        *,
        subjects: Sequence[Subjects] | None = None,
        no_answer_threshold: float | None | str = "default",
    ) -> list[list[Answer]]:
        """`read` for several questions at once, each with its own passages: the windows of all questions share
        the forward batches (sorted by length, so a batch holds windows of similar length: less padding).

        With `settings.early_stop_passages` = m > 0, passages are read in the order given (retrieval order) in
        two stages: the first m of every question, then the rest only for the questions whose best answer so
        far has a calibrated probability below `settings.early_stop_probability` (unset: is not confident by the
        reader's own threshold). Only a reader with a fitted calibration stops early: the unfitted default,
        sigmoid(margin), is no probability to stop on."""
        if len(questions) != len(passages) or (
            retrieval_scores is not None and len(retrieval_scores) != len(questions)
        ):
            raise OdqaError(
                f"{len(questions)} questions, {len(passages)} passage lists"
                + (f" and {len(retrieval_scores)} score lists" if retrieval_scores is not None else "")
            )
        if subjects is not None and len(subjects) != len(questions):
            raise OdqaError(f"{len(subjects)} subject sets for {len(questions)} questions; give one each")
        top_n = self.settings.top_n if top_n is None else top_n
        jobs = [
            ReadState.make(
                q,
                ps,
                retrieval_scores[i] if retrieval_scores is not None else None,
                top_n,
                subjects[i] if subjects is not None else None,
            )
            for i, (q, ps) in enumerate(zip(questions, passages))
        ]
        threshold = self.settings.no_answer_threshold if no_answer_threshold == "default" else no_answer_threshold
        first = self.settings.early_stop_passages if self.calibration.fitted else 0
        stages = [first, None] if first and first > 0 else [None]
        pending = [j for j in jobs if j.keep]
        for until in stages:
            pairs = [
                (j, n)
                for j in pending
                for n in range(len(j.read), len(j.keep) if until is None else min(until, len(j.keep)))
            ]
            self.passages_read += len(pairs)
            for (job, _), (spans, null) in zip(
                pairs,
                self.decode_passages(
                    [job.question for job, _ in pairs],
                    [job.texts[n] for job, n in pairs],
                    [n for _, n in pairs],
                    [job.question_for(n, self.settings.entity_marks) for job, n in pairs],
                ),
            ):
                job.read.append((spans, null))
            pending = [j for j in pending if len(j.read) < len(j.keep) and not self.decided(j, threshold)]
        return [self._answers(j, threshold) for j in jobs]

    def decode_passages(
        self,
        questions: Sequence[str],
        texts: Sequence[str],
        indexes: Sequence[int],
        read_as: Sequence[str] | None = None,
    ):
        """The spans and null score of each (question, passage text) pair; `indexes` number the passages within
        their question (PassageSpan.passage_index); `read_as`: each question as the model reads it beside its
        passage (entity marks), else the question itself."""
        if not questions:
            return []
        parts = self.focus_spans(questions, texts, indexes)
        read = [text[a:b] for text, (a, b) in zip(texts, parts)]
        found = self.logits(read_as or questions, read, separate_questions=True, groups=questions)
        out = self._decoded(found, read, indexes)
        for (spans, _), (shift, _) in zip(out, parts):
            for span in spans:  # offsets into the part read -> offsets into the whole passage
                span.start_char += shift
                span.end_char += shift
        return out

    def _decoded(self, found, texts: Sequence[str], indexes: Sequence[int]) -> list[tuple[list[PassageSpan], float]]:
        """The spans and null score of each text from `found` (what `logits` gave for them), its windows decoded
        together with the settings' answer bound and spans per window; `indexes` as for decode_passages."""
        w, starts, ends = found
        windows: list[list] = [[] for _ in texts]
        for i, p in enumerate(w.sample):
            windows[p].append((starts[i], ends[i], w.context_start[i], w.context_end[i], w.offsets[i]))
        s = self.settings
        return [
            decode_passage(
                n, text, passage, max_answer_tokens=s.answer_tokens, top_k=s.spans_per_window, cut=s.cut_answers
            )
            for n, text, passage in zip(indexes, texts, windows)
        ]

    def focus_spans(
        self, questions: Sequence[str], texts: Sequence[str], indexes: Sequence[int] | None = None
    ) -> list[tuple[int, int]]:
        """The character span of each passage text that is read: all of it, or with `settings.focus_words` the
        run of its sentences that best matches the question (reader.focus), except for the passages whose
        `indexes` (their place among the question's passages) are below `settings.whole_passages`."""
        words = self.settings.focus_words
        if not words or words <= 0:
            return [(0, len(t)) for t in texts]
        from odqa.reader.focus import Focus

        top = self.settings.whole_passages
        if self._focus is None or (self._focus.max_words, self._focus.whole_first) != (words, top):
            self._focus = Focus(words, whole_first=top)
        return self._focus.spans(questions, texts, indexes)

    def rank(self, job: ReadState, threshold):
        """The job's answers over the passages read so far, and whether they are best guesses (none passed
        the threshold)."""
        s = self.settings
        spans = [sp for passage_spans, _ in job.read for sp in passage_spans]
        nulls = [null for _, null in job.read]
        scores = job.scores[: len(job.read)] if job.scores is not None else None
        subject_bonus = (
            [s.subject_weight * job.about_subject(n) for n in range(len(job.read))] if s.subject_weight else None
        )

        def ranked_with(no_answer_threshold):
            return aggregate(
                spans,
                nulls,
                scores,
                retrieval_weight=s.retrieval_weight,
                no_answer_threshold=no_answer_threshold,
                top_n=job.top_n,
                temperature=s.temperature,
                selection_weight=s.selection_weight,
                passage_bonus=subject_bonus,
            )

        ranked = ranked_with(threshold)
        return (ranked, False) if ranked else (ranked_with(None), True)

    def decided(self, job: ReadState, threshold) -> bool:
        """Whether the best answer over the passages read so far is sure enough to stop reading."""
        ranked, guessing = self.rank(job, threshold)
        if guessing or not ranked:
            return False
        best = ranked[0]
        probability = self.calibration.probability(best.margin, best.probability)
        bar = self.settings.early_stop_probability
        return self.calibration.confident(probability) if bar is None else probability >= bar

    def _answers(self, job: ReadState, threshold) -> list[Answer]:
        if not job.read:
            return []
        ranked, guessing = self.rank(job, threshold)
        read = [job.passages[i] for i in job.keep[: len(job.read)]]
        return [self._answer(a, read, guessing) for a in ranked]

    def _answer(self, a: AggregatedAnswer, passages: list[Passage], guessing: bool) -> Answer:
        p = passages[a.best.passage_index]
        probability = self.calibration.probability(a.margin, a.probability)
        evidence = [
            {
                "passage_id": passages[sp.passage_index].id,
                "title": passages[sp.passage_index].title,
                "start": sp.start_char,
                "end": sp.end_char,
                "text": sp.text,
                "score": round(sp.score, 4),
            }
            for sp in a.evidence
        ]
        return Answer(
            text=a.best.text,
            score=float(a.score),
            probability=probability,
            passage_id=p.id,
            title=p.title,
            start=a.best.start_char,
            end=a.best.end_char,
            context=p.text,
            margin=float(a.margin),
            share=float(min(1.0, a.probability)),
            confident=not guessing and self.calibration.confident(probability),
            calibrated=self.calibration.fitted,
            evidence=evidence,
        )

    def read_batch(
        self,
        questions: Sequence[str],
        contexts: Sequence[str],
        no_answer_threshold: float | None = None,
        titles: Sequence[str] | None = None,
    ) -> list[Answer | None]:
        """One passage per question (SQuAD evaluation): the best answer of each pair, windows of all pairs
        batched together. None where the null span wins (only with a threshold). `titles`: each passage's article,
        which a reader with entity marks reads beside the question (no entity linked)."""
        return self.decode_batch(contexts, self.logits(self.read_as(questions, titles), contexts), no_answer_threshold)

    def read_as(self, questions: Sequence[str], titles: Sequence[str] | None) -> list[str]:
        """The questions as this reader reads them beside passages of articles `titles`, nothing linked."""
        if not self.settings.entity_marks:
            return list(questions)
        titles = titles if titles is not None else [""] * len(questions)
        return [marked_question(q, t, None) for q, t in zip(questions, titles)]

    def decode_batch(
        self, contexts: Sequence[str], found, no_answer_threshold: float | None = None
    ) -> list[Answer | None]:
        """read_batch's answers from `found`, what `logits` gave for the same questions and contexts (so one
        forward pass can be decoded under several settings)."""
        out: list[Answer | None] = []
        s = self.settings
        for text, (spans, null) in zip(contexts, self._decoded(found, contexts, [0] * len(contexts))):
            ranked = aggregate(
                spans,
                [null],
                None,
                retrieval_weight=0.0,
                no_answer_threshold=None,
                top_n=1,
                temperature=s.temperature,
                selection_weight=0.0,
            )
            if not ranked or (no_answer_threshold is not None and not ranked[0].margin > no_answer_threshold):
                out.append(None)
                continue
            out.append(self._answer(ranked[0], [Passage(id="", title="", text=text)], guessing=False))
        return out


def _load_tokenizer(name: str, path: str):
    """The checkpoint's own tokenizer class (transformers' AutoTokenizer): a hub name or a folder without a
    cached graph loads the torch module anyway."""
    from transformers import AutoConfig, AutoTokenizer

    try:
        config = AutoConfig.from_pretrained(path, **hub_options(path))
    except (OSError, ValueError) as exc:
        raise OdqaError(
            f"cannot load reader {name!r}: not a model folder or a known model name ({exc.__class__.__name__})"
        ) from exc
    _check_qa_architectures(name, getattr(config, "architectures", None))
    try:
        return AutoTokenizer.from_pretrained(path, **hub_options(path))
    except (OSError, ValueError) as exc:
        raise OdqaError(f"cannot load reader {name!r}: {exc}") from exc
