"""The QA pipeline: question -> entity links -> passages (BM25/dense/hybrid + linked entities' passages)
-> reader -> ranked answers. Components load lazily, once, and stay warm for the next question."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from odqa.config import OdqaConfig
from odqa.core.errors import IndexMismatchError, OdqaError
from odqa.core.fusion import minmax_scale
from odqa.core.logs import get_logger
from odqa.core.protocols import Retriever, SearchBackend
from odqa.core.runtime import InferenceSettings
from odqa.core.types import Answer, Mention, Passage, SearchHit
from odqa.indexes.analysis import LANGUAGE_NAMES, detect_language
from odqa.retriever.base import fit_k
from odqa.retriever.registry import INDEX_BACKENDS, backend_of, build_retriever, kb_beside, open_index

if TYPE_CHECKING:  # loaded on first use (torch, transformers)
    from odqa.linker.linker import Linker as LinkerModel
    from odqa.reader.model import Reader as ReaderModel

log = get_logger(__name__)
MAX_QUESTION_CHARS = 500
_HAS_WORD = re.compile(r"\w", re.UNICODE)


@dataclass
class Result:
    question: str
    answers: list[Answer]
    passages: list[SearchHit]
    mentions: list[Mention] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)  # seconds per stage
    notices: list[str] = field(default_factory=list)

    @property
    def answered(self) -> bool:
        return bool(self.answers)

    @property
    def confident(self) -> bool:
        """The top answer's calibrated probability reaches the reader's threshold (else: a best guess)."""
        return bool(self.answers) and self.answers[0].confident

    def to_dict(self) -> dict[str, Any]:
        return {
            "question": self.question,
            "confident": self.confident,
            "answers": [a.to_dict() for a in self.answers],
            "passages": [
                {"rank": i, "score": h.score, "source": h.source, **(h.passage.to_dict() if h.passage else {})}
                for i, h in enumerate(self.passages, 1)
            ],
            "mentions": [m.to_dict() for m in self.mentions],
            "timings_ms": {k: round(v * 1000, 1) for k, v in self.timings.items()},
            "notices": self.notices,
        }


def clean_question(question: str) -> tuple[str, list[str]]:
    """Validate and trim a question; returns it with any notices. Raises OdqaError when nothing is asked."""
    notices = []
    if question and not question.isascii():
        # undecodable bytes of a command line arrive as lone surrogates, which tokenizers cannot encode
        question = (
            question.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
            if _encodes_with_escapes(question)
            else question.encode("utf-8", "replace").decode("utf-8")
        )
    text = " ".join((question or "").split())
    if not text or not _HAS_WORD.search(text):
        raise OdqaError("the question is empty (or only punctuation); type a question such as 'Who wrote Hamlet?'")
    if len(text) > MAX_QUESTION_CHARS:
        cut = text[:MAX_QUESTION_CHARS].rsplit(" ", 1)[0]
        notices.append(f"question truncated to its first {len(cut)} of {len(text)} characters")
        text = cut
    return text, notices


def _encodes_with_escapes(text: str) -> bool:
    try:
        text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return False
    return True


def _question_encoder(retriever):
    """The text encoder of a dense retriever or of a hybrid's dense part, else None."""
    return getattr(getattr(retriever, "dense", retriever), "encoder", None)


def relative_scores(scores: list[float]) -> list[float]:
    """Retrieval scores min-max scaled to [0, 1] within one question's passages: BM25, cosine and RRF scores
    live on unrelated scales, so `reader.retrieval_weight` is then the span-logit bonus of the best passage
    over the worst, whichever retriever ran."""
    return minmax_scale(scores)


class Pipeline:
    def __init__(
        self,
        config: OdqaConfig | None = None,
        default_index: Callable[[], Path] | None = None,
        default_kb: Callable[[], Path] | None = None,
        few_questions: bool = False,
    ):
        """`default_index`, `default_kb`: where the index and the knowledge base are when the config names none,
        asked on first use (the CLI passes the demo corpus's, which builds them on first use: building stays
        out of the query-time pipeline). `few_questions`: the process answers a few questions and exits (`odqa
        ask`; odqa.core.runtime.InferenceSettings)."""
        self.config = (config or OdqaConfig()).validate()
        self.few_questions = few_questions
        self._default_index = default_index
        self._default_kb = default_kb
        self._bundle: SearchBackend | None = None
        self._retrievers: dict[str, Retriever] = {}
        self._reader: ReaderModel | None = None
        self._reader_name: str | None = None
        self._linker: LinkerModel | None = None
        self._linker_off: str | None = None
        self.linker_notices: list[str] = []  # of the knowledge base the linker links against (KnowledgeBase.notices)

    # ---- components, loaded on first use ----------------------------------------------------------------
    @property
    def index_location(self) -> str:
        """The index folder, or an Elasticsearch index (es://host:9200/name) (retriever.registry)."""
        if self.config.index:
            return self.config.index
        if self._default_index is None:
            raise OdqaError("no index to search: set `index` in the config (or pass --index)")
        return str(self._default_index())

    @property
    def bundle(self):
        """The opened index (odqa.core.protocols.SearchBackend: an index folder, an Elasticsearch index)."""
        if self._bundle is None:
            self._bundle = open_index(self.index_location, self.config)
        return self._bundle

    @property
    def corpus_size(self) -> int:
        """Passages in the index."""
        return len(self.bundle)

    @property
    def inference(self) -> InferenceSettings:
        """How the models run (odqa.core.runtime.InferenceSettings): the config's precision and runtime, and
        `few_questions`."""
        return self.config.inference(self.few_questions)

    def retriever(self, kind: str | None = None) -> Retriever:
        kind = kind or self.config.retrieval.retriever
        if kind not in self._retrievers:
            retriever = build_retriever(
                self.bundle, self.config.retrieval, self.config.retriever_runtime(self.few_questions), kind
            )
            encoder = _question_encoder(retriever)
            if encoder is not None:  # the retriever's options carry the config's precision and runtime alone
                encoder.few_questions = self.few_questions
            self._retrievers[kind] = retriever
        return self._retrievers[kind]

    def check_available(self) -> None:
        """Before any work: the device the config names exists and the optional packages its retriever needs over
        this index are installed; else one line names the problem and its fix (OdqaError)."""
        from odqa.core.device import check_device_available

        check_device_available(self.config.device, "device")
        self.bundle.check_available(self.config.retrieval.retriever)

    @property
    def reader_name(self) -> str:
        """The reader the config names; for `auto`, the shipped reader for the index's language (logged once, with
        the reason, beside the inference plans)."""
        if self._reader_name is None:
            from odqa.reader.model import resolve_reader

            self._reader_name, why = resolve_reader(self.config.reader.model, lambda: self.bundle.info().language)
            if why:
                log.info("reader %s for %s (reader.model auto)", self._reader_name, why)
        return self._reader_name

    def unread_language(self) -> str | None:
        """A notice when the reader was not trained on the index's language (its saved `languages`; the shipped
        English reader's are ["en"]): its spans over such text are guesses, so none is called confident."""
        from odqa.core.models import models_install
        from odqa.reader.model import MULTILINGUAL_READER

        held = self.bundle.info().language
        languages = self.reader.settings.languages
        if not languages or held in languages:
            return None
        reads = ", ".join(LANGUAGE_NAMES.get(code, code) for code in languages)
        return (
            f"the reader {self.reader_name!r} was trained on {reads} text only, so its answers over this "
            f"{LANGUAGE_NAMES.get(held, held)} index are guesses and none is called confident; install "
            f"{MULTILINGUAL_READER} (a checkout has models/{MULTILINGUAL_READER}; else "
            f"{models_install(MULTILINGUAL_READER)}) and leave reader.model at auto"
        )

    @property
    def reader(self) -> ReaderModel:
        if self._reader is None:
            from odqa.reader.model import Reader

            c = self.config.reader
            self._reader = Reader.from_pretrained(
                self.reader_name,
                device=self.config.device or None,
                calibration=c.calibration or None,
                batch_size=c.batch_size,
                max_answer_tokens=c.max_answer_tokens,
                no_answer_threshold=c.no_answer_threshold,
                retrieval_weight=c.retrieval_weight,
                selection_weight=c.selection_weight,
                focus_words=c.focus_words,
                whole_passages=c.whole_passages,
                early_stop_passages=c.early_stop_passages,
                early_stop_probability=c.early_stop_probability,
                precision=self.config.precision,
                runtime=self.config.runtime,
                few_questions=self.few_questions,
            )
        return self._reader

    @property
    def linker(self) -> LinkerModel | None:
        """The entity linker, or None when disabled or when there is no knowledge base (the pipeline then runs
        without it, `linker_off` says why, once, on the log). A knowledge base that is there but damaged, half
        built or encoded by another entity encoder is refused (OdqaError), as a damaged index is."""
        if not self.config.linker.enabled or self.linker_off:
            return None
        if self._linker is None:
            from odqa.linker.kb import KnowledgeBase
            from odqa.linker.linker import Linker

            path = self._kb_found()
            if path is None:
                return None
            kb = KnowledgeBase.load(path)
            c = self.config.linker
            try:
                linker = Linker.from_pretrained(
                    c.model,
                    kb=kb,
                    device=self.config.device or None,
                    mention_threshold=c.mention_threshold,
                    entity_threshold=c.entity_threshold,
                    precision=self.config.precision,
                    runtime=self.config.runtime,
                )
            except IndexMismatchError:
                raise  # the KB is not the linker's: refused
            except OdqaError as exc:  # the linker model itself (not installed, say): answering goes on without it
                self._linker_off = f"entity linking is off: {exc}"
                log.warning("%s", self._linker_off)
                return None
            self.linker_notices = kb.notices(linker.config.languages)
            for notice in self.linker_notices:
                log.warning("%s", notice)
            self._linker = linker
        return self._linker

    @property
    def linker_off(self) -> str | None:
        """Why no entity is linked (no knowledge base, no linker model), once the linker was asked for; else None."""
        if not self.config.linker.enabled:
            return "entity linking is off (linker.enabled is false, or --no-linker)"
        return self._linker_off

    def _kb_found(self) -> Path | None:
        """The knowledge base's folder; None, with `linker_off` set and said once, where the index has none."""
        if self.config.linker.kb:
            return Path(self.config.linker.kb)  # named: refused when it is not there (KnowledgeBase.load)
        if self.config.index and kb_beside(self.config.index) is None:
            title = INDEX_BACKENDS.get(backend_of(self.config.index)).title
            why = (
                f"an {title} has no knowledge base beside it; set linker.kb to the one built beside the index "
                "folder it was loaded from (INDEX-kb)"
            )
        else:
            path = self.kb_path
            if path.exists():
                return path
            why = (
                f"the index has no knowledge base ({path} is not there); build it with `run_qa.py build-kb "
                f"--corpus {self._corpus_of_index()} --out {path}` (`run_qa.py index` builds it with the index)"
            )
        self._linker_off = f"no entities are linked: {why}, or pass --no-linker"
        log.warning("%s", self._linker_off)
        return None

    def _corpus_of_index(self) -> str:
        """The corpus the index folder was built from, as its manifest records it (CORPUS where it records none)."""
        from odqa.indexes.manifest import Manifest

        try:
            corpus = Manifest.load(self.index_location).params.get("corpus")
        except OdqaError:
            corpus = None
        return corpus if isinstance(corpus, str) and corpus else "CORPUS"

    @property
    def kb_path(self) -> Path:
        """linker.kb, else the KB beside the index folder (INDEX-kb, indexes.layout), else the demo corpus's KB."""
        if self.config.linker.kb:
            return Path(self.config.linker.kb)
        if self.config.index:
            kb = kb_beside(self.config.index)
            if kb is None:
                raise OdqaError(
                    f"an {INDEX_BACKENDS.get(backend_of(self.config.index)).title} has no knowledge base "
                    "beside it; set linker.kb (or pass --no-linker)"
                )
            return kb
        if self._default_kb is None:
            raise OdqaError("no knowledge base: set `linker.kb` in the config")
        return self._default_kb()

    def inference_plans(self) -> dict[str, dict]:
        """The runtime and precision of each model loaded so far (for --json output)."""
        plans = {}
        if self._reader is not None:
            plans["reader"] = {"model": self.reader_name, **self._reader.plan.to_dict()}
        if self._linker is not None:
            plans["linker"] = self._linker.plan.to_dict()
        for retriever in self._retrievers.values():
            encoder = _question_encoder(retriever)
            if encoder is not None:
                plans["encoder"] = encoder.plan(question_time=True).to_dict()
        return plans

    # ---- answering --------------------------------------------------------------------------------------
    def link(self, questions: list[str]) -> list[list[Mention]]:
        linker = self.linker
        return linker.link(questions) if linker is not None else [[] for _ in questions]

    def retrieve(
        self, questions: list[str], mentions: list[list[Mention]], k: int | None = None, retriever: str | None = None
    ) -> list[list[SearchHit]]:
        """The passages the reader gets for each (cleaned) question: the retriever's top k, with the entity bonus
        (retrieval.entity_bonus) for the questions' linked `mentions` (from `link`) on any index backend."""
        k = fit_k(k or self.config.retrieval.k, self.corpus_size)
        hits = self.retriever(retriever).search(questions, k)
        bonus = self.config.retrieval.entity_bonus
        if bonus > 0 and any(mentions):
            hits = self._add_entity_passages(questions, mentions, hits, bonus, k)
        return hits

    def language_differs(self, question: str) -> str | None:
        """A notice when `question` is written in Korean or Chinese and the index holds text of another language
        (its reader would guess a span from text it cannot match), else None. Questions in Latin script are read
        over any index: names and terms in them are shared across languages."""
        asked = detect_language([question])
        held = self.bundle.info().language
        if asked == "en" or asked == held:
            return None
        return (
            f"languages differ: the question is {LANGUAGE_NAMES.get(asked, asked)} and the index "
            f"{self.index_location} holds {LANGUAGE_NAMES.get(held, held)} text; ask in "
            f"{LANGUAGE_NAMES.get(held, held)}, or use an index of {LANGUAGE_NAMES.get(asked, asked)} text"
        )

    def ask(self, question: str, k: int | None = None, retriever: str | None = None) -> Result:
        return self.ask_batch([question], k=k, retriever=retriever)[0]

    def ask_batch(self, questions: list[str], k: int | None = None, retriever: str | None = None) -> list[Result]:
        """Answer several questions; linking, retrieval and reading each run batched across them."""
        k = k or self.config.retrieval.k
        cleaned = [clean_question(q) for q in questions]
        results = [Result(question=t, answers=[], passages=[], notices=list(n)) for t, n in cleaned]
        # a question in a language the index is not in is told so, not answered with a guess from other text
        differs = [self.language_differs(r.question) for r in results]
        for result, notice in zip(results, differs):
            result.notices += [notice] if notice else []
        kept = [i for i, notice in enumerate(differs) if not notice]
        kept_texts = [results[i].question for i in kept]
        texts = [r.question for r in results]
        mentions: list[list[Mention]] = [[] for _ in results]
        hits: list[list[SearchHit]] = [[] for _ in results]

        start = time.perf_counter()
        for i, linked in zip(kept, self.link(kept_texts) if kept else []):
            mentions[i] = linked
            results[i].notices += self.linker_notices  # names the KB may leave unlinked, and why
        link_time = (time.perf_counter() - start) / len(results)

        start = time.perf_counter()
        for i, retrieved in zip(
            kept, self.retrieve(kept_texts, [mentions[i] for i in kept], k=k, retriever=retriever) if kept else []
        ):
            hits[i] = retrieved
        retrieve_time = (time.perf_counter() - start) / len(results)

        # one reader call for all the questions that have passages: their windows share the forward batches
        start = time.perf_counter()
        asked = [i for i, h in enumerate(hits) if h]
        if asked:
            answers = self.reader.read_many(
                [texts[i] for i in asked],
                [cast("list[Passage]", [x.passage for x in hits[i]]) for i in asked],  # retrieve() gives them
                [relative_scores([x.score for x in hits[i]]) for i in asked],
                top_n=self.config.reader.top_n,
            )
            for i, a in zip(asked, answers):
                results[i].answers = a
        read_time = (time.perf_counter() - start) / len(texts)
        unread = self.unread_language() if asked else None

        for result, m, h, other_language in zip(results, mentions, hits, differs):
            result.mentions, result.passages = m, h
            result.timings["link"] = link_time
            result.timings["retrieve"] = retrieve_time
            result.timings["read"] = read_time
            result.timings["total"] = sum(result.timings.values())
            if other_language:
                continue
            if unread and result.answers:
                result.notices.append(unread)
                for answer in result.answers:
                    answer.confident = False
                continue
            if not h:
                result.notices.append("no passage was retrieved for the question, so none was read")
            elif not result.answers:
                result.notices.append("no answer found in the retrieved passages")
            elif not result.answers[0].calibrated:
                result.notices.append(
                    f"uncalibrated reader: {self.reader_name!r} has no calibration.json, so its score "
                    f"{result.answers[0].probability:.2f} is no probability of being right and no answer is called "
                    "confident (fit one with `odqa fit-calibration`)"
                )
            elif not result.confident:
                result.notices.append(
                    f"no confident answer: the best guess has p={result.answers[0].probability:.2f}, below the "
                    f"threshold {self.reader.calibration.threshold:.2f} chosen on dev"
                )
        return results

    def _add_entity_passages(self, texts, mentions, hits, bonus: float, k: int):
        """The entity bonus (odqa.core.fusion): each linked entity's article passages, from whichever backend
        holds the index (an index folder's store, an Elasticsearch index), fused into the retriever's hits."""
        from odqa.linker.guided import entity_hits, fuse_entity_hits

        articles = self.bundle.article_passages()
        return [fuse_entity_hits(h, entity_hits(t, m, articles), bonus, k) for t, m, h in zip(texts, mentions, hits)]
