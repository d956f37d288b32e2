"""The QA pipeline: question -> entity links -> passages (BM25/dense/hybrid + linked entities' passages)
-> reader -> ranked answers. Components load lazily, once, and stay warm for the next question."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
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
from odqa.reader.entity_marks import subjects_of
from odqa.retriever.base import fit_k
from odqa.retriever.registry import (
    INDEX_BACKENDS,
    backend_of,
    build_retriever,
    check_retriever_available,
    kb_beside,
    open_index,
)

if TYPE_CHECKING:  # loaded on first use (torch, transformers)
    from odqa.core.protocols import Reader as ReaderModel
    from odqa.linker.linker import Linker as LinkerModel

log = get_logger(__name__)
MAX_QUESTION_CHARS = 500
NO_CONFIDENT_ANSWER = "no confident answer"  # how the notice of a best guess starts (the shell says it once)
_HAS_WORD = re.compile(r"\w", re.UNICODE)


@dataclass
class Result:
    question: str
    answers: list[Answer]
    passages: list[SearchHit]
    mentions: list[Mention] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)  # seconds per stage
    notices: list[str] = field(default_factory=list)
    route: Route | None = None

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
                {
                    "rank": i,
                    "score": h.score,
                    "source": h.source,
                    "fusion": h.fusion,
                    **(h.passage.to_dict() if h.passage else {}),
                }
                for i, h in enumerate(self.passages, 1)
            ],
            "mentions": [m.to_dict() for m in self.mentions],
            "timings_ms": {k: round(v * 1000, 1) for k, v in self.timings.items()},
            "notices": self.notices,
            **({"route": self.route.to_dict()} if self.route is not None else {}),
        }


@dataclass(frozen=True)
class Route:
    """How one question is answered over the index: the question's language, the passages', the retriever kind and
    the reader; `why` says what differs from the configured path and why (the inference plan), `refused` why the
    question cannot be answered over this index (said instead of a guess)."""

    asked: str
    held: str
    retriever: str
    reader: str
    why: str = ""
    refused: str = ""

    @property
    def cross_language(self) -> bool:
        return self.asked != self.held

    def to_dict(self) -> dict[str, str]:
        out = {"question_language": self.asked, "passage_language": self.held, "retriever": self.retriever}
        out.update({"reader": self.reader} if self.reader else {})
        out.update({"why": self.why} if self.why else {})
        return out


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


def _grouped(indices: list[int], key: Callable[[int], str]) -> list[tuple[str, list[int]]]:
    """`indices` grouped by `key`, groups in order of first appearance and indices in order within each."""
    groups: dict[str, list[int]] = {}
    for i in indices:
        groups.setdefault(key(i), []).append(i)
    return list(groups.items())


def shipped_installed(name: str) -> bool:
    from odqa.core.models import shipped_model

    return shipped_model(name) is not None


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
        default_kb: Callable[..., Path] | None = None,
    ):
        """`default_index`, `default_kb`: where the index and the knowledge base are when the config names none,
        asked on first use (the CLI passes the demo corpus's, which builds them on first use: building stays
        out of the query-time pipeline)."""
        self.config = (config or OdqaConfig()).validate()
        self._default_index = default_index
        self._default_kb = default_kb
        self._bundle: SearchBackend | None = None
        self._retrievers: dict[str, Retriever] = {}
        self._readers: dict[str, ReaderModel] = {}
        self._reader_name: str | None = None
        self._linker: LinkerModel | None = None
        self._linker_off: str | None = None
        # the multilingual linker beside an English one, for questions in other languages (loaded once asked for)
        self._other_language_linker: LinkerModel | None = None
        self._other_language_tried = False
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
        """How the models run (odqa.core.runtime.InferenceSettings): the config's precision and runtime."""
        return self.config.inference()

    def retriever(self, kind: str | None = None) -> Retriever:
        kind = kind or self.config.retrieval.retriever
        if kind not in self._retrievers:
            self._retrievers[kind] = build_retriever(
                self.bundle, self.config.retrieval, self.config.retriever_runtime(), kind
            )
        return self._retrievers[kind]

    def check_available(self) -> None:
        """Before any work: the device the config names exists and the optional packages its retriever needs over
        this index are installed; else one line names the problem and its fix (OdqaError)."""
        from odqa.core.device import check_device_available

        check_device_available(self.config.device, "device")
        check_retriever_available(self.bundle, self.config.retrieval.retriever)

    @property
    def reader_name(self) -> str:
        """The reader the config names; for `auto`, the shipped reader for the index's language (logged once, with
        the reason, beside the inference plans)."""
        if self._reader_name is None:
            from odqa.reader.settings import resolve_reader

            self._reader_name, why = resolve_reader(self.config.reader.model, lambda: self.bundle.info().language)
            if why:
                log.info("reader %s for %s (reader.model auto)", self._reader_name, why)
        return self._reader_name

    def unread_language(self, reader_name: str | None = None, route: Route | None = None) -> str | None:
        """A notice when the reader was not trained on the passages' language, or on the question's (its saved
        `languages`; the shipped English reader's are ["en"]): its spans are then guesses, so none is called
        confident."""
        from odqa.core.models import models_install
        from odqa.reader.settings import AUTO_READER, MULTILINGUAL_READER

        name = reader_name or self.reader_name
        held = route.held if route is not None else self.bundle.info().language
        needed = [held] + ([route.asked] if route is not None and route.asked != held else [])
        languages = self.reader_named(name).languages
        if not languages:
            return None
        missing = [code for code in needed if code not in languages]
        if not missing:
            return None
        reads = ", ".join(LANGUAGE_NAMES.get(code, code) for code in languages)
        if shipped_installed(MULTILINGUAL_READER):  # installed: only the setting stands in the way
            fix = (
                f"{MULTILINGUAL_READER} is installed: set reader.model to {AUTO_READER} "
                f"(or --reader {MULTILINGUAL_READER})"
            )
        else:
            fix = (
                f"install {MULTILINGUAL_READER} (a checkout has models/{MULTILINGUAL_READER}; else "
                f"{models_install(MULTILINGUAL_READER)}) and leave reader.model at {AUTO_READER}"
            )
        return (
            f"the reader {name!r} was trained on {reads} text only, so its answers to this "
            f"{' and '.join(LANGUAGE_NAMES.get(code, code) for code in missing)} text are guesses and none is called "
            f"confident; {fix}"
        )

    @property
    def reader(self) -> ReaderModel:
        """The reader of questions in the index's own language (`reader_name`)."""
        return self.reader_named(self.reader_name)

    def reader_named(self, name: str) -> ReaderModel:
        """A reader by name with the config's reader settings, loaded once (a cross-language question may need
        another reader than the index's own language)."""
        if name not in self._readers:
            from odqa.reader.registry import build_reader

            self._readers[name] = build_reader(
                replace(self.config.reader, model=name),
                device=self.config.device or None,
                inference=self.config.inference(),
            )
        return self._readers[name]

    @property
    def linker(self) -> LinkerModel | None:
        """The entity linker, or None when disabled or when there is no knowledge base (the pipeline then runs
        without it, `linker_off` says why, once, on the log). A knowledge base that is there but damaged, half
        built or encoded by another entity encoder is refused (OdqaError), as a damaged index is."""
        if not self.config.linker.enabled or self.linker_off:
            return None
        if self._linker is None:
            from odqa.linker.kb import KnowledgeBase

            path = self._kb_found()
            if path is None:
                return None
            kb = KnowledgeBase.load(path)
            try:
                linker = self._load_linker(self._linker_model_for(kb), kb)
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

    def _load_linker(self, model: str, kb) -> LinkerModel:
        from odqa.linker.registry import build_linker

        return build_linker(
            self.config.linker, kb, model=model, device=self.config.device or None, inference=self.config.inference()
        )

    def _linker_model_for(self, kb) -> str:
        """linker.model; left at the shipped English linker, the multilingual one for a KB encoded by its entity
        encoder (the KB of a Korean or Chinese index)."""
        from odqa.linker.heads import DEFAULT_LINKER, MULTILINGUAL_LINKER, saved_config

        model = self.config.linker.model
        if model != DEFAULT_LINKER or not shipped_installed(MULTILINGUAL_LINKER):
            return model
        multilingual = kb.encoded_by(saved_config(MULTILINGUAL_LINKER).entity_encoder)
        if multilingual and not kb.encoded_by(saved_config(DEFAULT_LINKER).entity_encoder):
            return MULTILINGUAL_LINKER
        return model

    def linker_for(self, language: str) -> LinkerModel | None:
        """The linker of questions in `language`: the configured one where it was trained on the language, else
        the multilingual linker over the demo's multilingual KB (routed by the question's language: it links
        Korean and Chinese questions, the English linker keeps English ones, which it links better)."""
        linker = self.linker
        if linker is None or language in linker.config.languages:
            return linker
        if not self._other_language_tried:
            self._other_language_tried = True
            self._other_language_linker = self._load_other_language_linker()
        return self._other_language_linker or linker

    def _load_other_language_linker(self) -> LinkerModel | None:
        from odqa.linker.heads import DEFAULT_LINKER, MULTILINGUAL_LINKER, saved_config
        from odqa.linker.kb import KnowledgeBase

        c = self.config.linker
        # the demo builds its multilingual KB on first use; a KB named or beside an index is the one there is
        if c.model != DEFAULT_LINKER or c.kb or self.config.index or self._default_kb is None:
            return None
        if not shipped_installed(MULTILINGUAL_LINKER):
            return None
        try:
            encoder = saved_config(MULTILINGUAL_LINKER).entity_encoder
            return self._load_linker(MULTILINGUAL_LINKER, KnowledgeBase.load(self._default_kb(encoder=encoder)))
        except OdqaError as exc:  # English questions are still linked
            log.warning("Korean and Chinese questions are not linked: %s", exc)
            return None

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
        for name, reader in self._readers.items():
            key = "reader" if name == self._reader_name or len(self._readers) == 1 else f"reader:{name}"
            plans[key] = {"model": name, **reader.plan.to_dict()}
        if self._linker is not None:
            plans["linker"] = self._linker.plan.to_dict()
        if self._other_language_linker is not None:
            plans["linker:multilingual"] = self._other_language_linker.plan.to_dict()
        for retriever in self._retrievers.values():
            encoder = _question_encoder(retriever)
            if encoder is not None:
                plans["encoder"] = encoder.plan(question_time=True).to_dict()
        return plans

    # ---- answering --------------------------------------------------------------------------------------
    def link(self, questions: list[str]) -> list[list[Mention]]:
        """Each question's mentions, by the linker of its language (`linker_for`)."""
        out: list[list[Mention]] = [[] for _ in questions]
        if self.linker is None:
            return out
        for language, group in _grouped(list(range(len(questions))), lambda i: detect_language([questions[i]])):
            linker = self.linker_for(language)
            if linker is not None:
                for i, mentions in zip(group, linker.link([questions[i] for i in group])):
                    out[i] = mentions
        return out

    def retrieve(
        self,
        questions: list[str],
        mentions: list[list[Mention]] | None = None,
        k: int | None = None,
        retriever: str | None = None,
    ) -> list[list[SearchHit]]:
        """The passages the reader gets for each (cleaned) question: the retriever's top k, with the entity bonus
        (retrieval.entity_bonus) for the questions' linked `mentions` (from `link`) on any index backend. Without
        `mentions`, the questions are linked here where the bonus needs them (as `ask` does)."""
        if isinstance(questions, str):
            raise OdqaError("retrieve takes a list of questions: pipeline.retrieve([question])")
        k = fit_k(k or self.config.retrieval.k, self.corpus_size)
        bonus = self.config.retrieval.entity_bonus
        if mentions is None:
            mentions = self.link(questions) if bonus > 0 else [[] for _ in questions]
        elif len(mentions) != len(questions):
            raise OdqaError(f"retrieve got {len(mentions)} mention lists for {len(questions)} questions; give one each")
        hits = self.retriever(retriever).search(questions, k)
        if bonus > 0 and any(mentions):
            hits = self._add_entity_passages(questions, mentions, hits, bonus, k)
        return hits

    def route(self, question: str, retriever: str | None = None) -> Route:
        """How `question` is answered over this index. In the passages' language: the configured retriever and
        reader. In another language, over vectors of an encoder that shares one space between the two (an index
        built with `--encoder encoder-multilingual`): dense retrieval alone (BM25 matches words, which the two
        languages do not share) and, for `reader.model = auto`, the multilingual reader. Otherwise the question is
        refused with what would answer it. Questions in Latin script over a Korean or Chinese index without such
        vectors are read as before: names and terms in them are shared across languages."""
        kind = retriever or self.config.retrieval.retriever
        info = self.bundle.info()
        asked, held = detect_language([question]), info.language
        if asked == held:
            return Route(asked, held, kind, self.reader_name)
        asked_name, held_name = LANGUAGE_NAMES.get(asked, asked), LANGUAGE_NAMES.get(held, held)
        shared = info.vectors and info.encoder is not None and {asked, held} <= set(self.vector_languages())
        if not shared:
            if asked == "en":
                return Route(asked, held, kind, self.reader_name)
            encoder = f" (its vectors come from {info.encoder.name!r}, which is not)" if info.encoder else ""
            return Route(
                asked,
                held,
                kind,
                "",
                refused=(
                    f"languages differ: the question is {asked_name} and the index holds {held_name} text; ask in "
                    f"{held_name}, or use an index whose vectors are multilingual (`odqa index --encoder "
                    f"encoder-multilingual`){encoder}"
                ),
            )
        reader, why_reader = self.cross_language_reader(asked, held)
        why = f"{asked_name} question over {held_name} passages: dense retrieval in the shared vector space" + (
            f" (not {kind}: BM25 matches words, which the two languages do not share)" if kind != "dense" else ""
        )
        return Route(asked, held, "dense", reader, why + (f"; {why_reader}" if why_reader else ""))

    def vector_languages(self) -> tuple[str, ...]:
        """The languages the index's vectors share one space for (its encoder's `languages`)."""
        from odqa.core.text_encoding import encoder_languages

        record = self.bundle.info().encoder
        return encoder_languages(record.question_encoder or record.name) if record is not None else ()

    def cross_language_reader(self, asked: str, held: str) -> tuple[str, str]:
        """(name, why) of the reader for questions in `asked` over passages in `held`: the configured one, or for
        `auto` the multilingual reader where it is installed and the pair is not English on both sides."""
        from odqa.reader.settings import AUTO_READER, MULTILINGUAL_READER

        if str(self.config.reader.model).strip() != AUTO_READER:
            return self.reader_name, ""
        if shipped_installed(MULTILINGUAL_READER):
            return MULTILINGUAL_READER, f"{MULTILINGUAL_READER} reads both languages"
        return self.reader_name, ""

    def language_differs(self, question: str) -> str | None:
        """A notice when `question` cannot be answered over this index in its language (`route`), else None."""
        return self.route(question).refused or None

    def ask(self, question: str, k: int | None = None, retriever: str | None = None) -> Result:
        return self.ask_batch([question], k=k, retriever=retriever)[0]

    def ask_batch(self, questions: list[str], k: int | None = None, retriever: str | None = None) -> list[Result]:
        """Answer several questions; linking, retrieval and reading each run batched across them (questions of
        one route together: a cross-language question takes the dense retriever and may take another reader)."""
        k = k or self.config.retrieval.k
        cleaned = [clean_question(q) for q in questions]
        results = [Result(question=t, answers=[], passages=[], notices=list(n)) for t, n in cleaned]
        for result in results:
            result.route = self.route(result.question, retriever)
            result.notices += [result.route.refused] if result.route.refused else []
        kept = [i for i, r in enumerate(results) if r.route is not None and not r.route.refused]
        texts = [r.question for r in results]
        mentions: list[list[Mention]] = [[] for _ in results]
        hits: list[list[SearchHit]] = [[] for _ in results]

        start = time.perf_counter()
        for i, linked in zip(kept, self.link([texts[i] for i in kept]) if kept else []):
            mentions[i] = linked
            results[i].notices += self.linker_notices  # names the KB may leave unlinked, and why
        link_time = (time.perf_counter() - start) / len(results)

        start = time.perf_counter()
        routes = [r.route or self.route(r.question, retriever) for r in results]  # each set just above
        for kind, group in _grouped(kept, lambda i: routes[i].retriever):
            for i, retrieved in zip(
                group, self.retrieve([texts[i] for i in group], [mentions[i] for i in group], k, kind)
            ):
                hits[i] = retrieved
        retrieve_time = (time.perf_counter() - start) / len(results)

        # one reader call per reader for the questions that have passages: their windows share the forward batches
        start = time.perf_counter()
        for name, group in _grouped([i for i, h in enumerate(hits) if h], lambda i: routes[i].reader):
            answers = self.reader_named(name).read_many(
                [texts[i] for i in group],
                [cast("list[Passage]", [x.passage for x in hits[i]]) for i in group],  # retrieve() gives them
                [relative_scores([x.score for x in hits[i]]) for i in group],
                subjects=[subjects_of(mentions[i]) for i in group],
            )
            for i, a in zip(group, answers):
                results[i].answers = a
        read_time = (time.perf_counter() - start) / len(texts)

        for result, m, h in zip(results, mentions, hits):
            result.mentions, result.passages = m, h
            result.timings["link"] = link_time
            result.timings["retrieve"] = retrieve_time
            result.timings["read"] = read_time
            result.timings["total"] = sum(result.timings.values())
            route = result.route
            if route is None or route.refused:
                continue
            unread = self.unread_language(route.reader, route) if result.answers else None
            if unread:
                result.notices.append(unread)
                for answer in result.answers:
                    answer.confident = False
                continue
            if result.answers and route.cross_language:
                self._calibrate_cross_language(result)
            if not h:
                result.notices.append("no passage was retrieved for the question, so none was read")
            elif not result.answers:
                result.notices.append("no answer found in the retrieved passages")
            elif not result.answers[0].calibrated:
                result.notices.append(
                    f"uncalibrated reader: {route.reader!r} has no calibration.json, so its score "
                    f"{result.answers[0].probability:.2f} is no probability of being right and no answer is called "
                    "confident (fit one with `odqa fit-calibration`)"
                )
            elif not result.confident:
                result.notices.append(
                    f"{NO_CONFIDENT_ANSWER}: the best guess has p={result.answers[0].probability:.2f}, below the "
                    f"threshold {self._threshold(route):.2f} chosen on dev"
                )
        return results

    def _threshold(self, route: Route) -> float:
        calibration = self.reader_named(route.reader).calibration
        cross = calibration.for_cross_language() if route.cross_language else None
        return (cross or calibration).threshold

    def _calibrate_cross_language(self, result: Result) -> None:
        """Answers to a question in another language than their passages' take the reader's cross-language fit;
        where it has none, none is called confident (its probabilities were fitted on one language)."""
        assert result.route is not None  # set by ask_batch before reading
        cross = self.reader_named(result.route.reader).calibration.for_cross_language()
        if cross is None:
            for answer in result.answers:
                answer.confident = False
            asked = LANGUAGE_NAMES.get(result.route.asked, result.route.asked)
            held = LANGUAGE_NAMES.get(result.route.held, result.route.held)
            result.notices.append(
                f"no answer is called confident: the reader's probabilities were not fitted on {asked} questions "
                f"over {held} passages"
            )
            return
        for answer in result.answers:
            answer.probability = cross.probability(answer.margin, answer.share)
            answer.confident = cross.confident(answer.probability)

    def _add_entity_passages(self, texts, mentions, hits, bonus: float, k: int):
        """The entity bonus (odqa.core.fusion): each linked entity's article passages, from whichever backend
        holds the index (an index folder's store, an Elasticsearch index), fused into the retriever's hits."""
        from odqa.linker.guided import entity_hits, fuse_entity_hits

        articles = self.bundle.article_passages()
        return [fuse_entity_hits(h, entity_hits(t, m, articles), bonus, k) for t, m, h in zip(texts, mentions, hits)]
