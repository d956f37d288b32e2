"""Build an index folder from a corpus: passages (Arrow), BM25 and dense vectors, with one manifest.

Layout of `OUT/`: `manifest.json`, `passages/`, `bm25/`, `dense/` (each with its own manifest; the
folder names are `indexes.layout.IndexLayout`'s, which the readers use too). Work in progress lives in `OUT.work/`
and survives a crash: rerunning the same command reuses the finished passages, BM25 index and encoded chunks. Dense
encoding is split into chunks of `chunk_size` passages; `--shard i/n` encodes only chunks i, i+n, ... so several
processes or machines can share the work (they need a shared `OUT.work/`, or copy their chunk files into one before the
final run). Nothing replaces `OUT/` until everything is built.

The linker's knowledge base is built beside the index, in `OUT-kb` (`kb`, on by default: one entity per titled
article, encoded by the entity encoder of the linker that links against it), after the index is in place and before
the work folder goes, so that a build interrupted there resumes: the index is put in place again from its finished
parts and the KB is built. A KB already there that was built from the same corpus files by the same entity encoder is
kept; any other is replaced, atomically (`KnowledgeBase.write`), when the new one is whole.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import os
import shutil
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import xxhash
from tqdm.auto import tqdm

from odqa.core.atomic import publish_folder, remove_tree, tree_bytes, write_npy, write_npy_blocks
from odqa.core.errors import DiskFullError, OdqaError, is_disk_full, no_room_reason
from odqa.core.logs import get_logger
from odqa.core.models import DEFAULT_ENCODER, model_fingerprint
from odqa.core.runtime import INFERENCE, PRECISIONS, InferenceSettings
from odqa.core.settings import field_default
from odqa.core.text_encoding import EncoderSettings, RetrieverInfo
from odqa.corpus.readers import CorpusFields, corpus_files, corpus_sources, iter_documents, iter_passages
from odqa.indexes.analysis import ANALYZERS, LANGUAGE_NAMES, LANGUAGES, analyzer_for, detect_language
from odqa.indexes.bm25 import TEXT_ENGINES, build_text_index, require_engine
from odqa.indexes.integrity import build_lock, describe_part, recover_swap
from odqa.indexes.layout import BM25, DENSE, PASSAGES, SEARCH_PARTS, SHARD_RECORDS, SHARDS, IndexLayout
from odqa.indexes.manifest import MANIFEST, Manifest
from odqa.indexes.vector import VectorIndex, VectorIndexParams
from odqa.linker.settings import LinkerSettings

if TYPE_CHECKING:  # the store loads `datasets` (seconds): imported where an index is built, not by the CLI's parser
    from odqa.core.cluster import Cluster
    from odqa.corpus.store import PassageStore

BACKENDS = SEARCH_PARTS
log = get_logger(__name__)


@dataclass
class IndexSpec:
    """What `run_qa.py index` builds; the metadata's help and choices are the command's (odqa.commands.options)."""

    corpus: str
    out: str
    backends: Sequence[str] = BACKENDS
    encoder: str = DEFAULT_ENCODER  # passage encoder
    query_encoder: str = ""  # recorded for search; empty: the one the passage encoder names, else itself
    pooling: str = ""  # empty: the model's own (TextEncoder.from_pretrained)
    similarity: str = ""
    query_prefix: str | None = None
    passage_prefix: str | None = None
    words: int = field(default=100, metadata={"help": "target passage length in words"})
    fields: CorpusFields = field(default_factory=CorpusFields)  # the corpus's id, title and text columns
    bm25_engine: str = field(default="tantivy", metadata={"help": "BM25 engine", "choices": TEXT_ENGINES})
    language: str = field(
        default="auto",
        metadata={
            "help": "corpus language: picks the BM25 analyser (auto: detected from the passages' scripts); stored in "
            "the manifest, queries are analysed the same way",
            "choices": ("auto", *LANGUAGES),
        },
    )
    analyzer: str | None = field(
        default=None,
        metadata={  # unset: the language's (indexes/analysis.py)
            "help": "BM25 analyser other than the language's default",
            "choices": ANALYZERS,
        },
    )
    vector: VectorIndexParams = field(default_factory=VectorIndexParams)
    batch_size: int = field(default=64, metadata={"help": "passages encoded per batch"})
    max_length: int | None = field(
        default=None,
        metadata={  # None: the encoder's own limit (encoder_max_length)
            "help": "encoder max tokens per passage (default: the encoder's own: multilingual e5 512, others 256)"
        },
    )
    chunk_size: int = field(default=20000, metadata={"help": "passages per resumable encoding chunk"})
    shard: tuple[int, int] | None = None  # (i, n): encode only chunks i, i+n, ...
    part: tuple[int, int] | None = None  # (i, n): only the i-th of n consecutive groups of the corpus's files
    kb: bool = field(
        default=True,
        metadata={
            "help": "also build the linker's knowledge base beside the index, in OUT-kb: one entity per titled "
            "article, encoded by the linker's entity encoder; kept when built from the same corpus (--no-kb: none "
            "built, one already there left as it is)"
        },
    )
    linker: str = field_default(LinkerSettings, "model")  # the linker whose entity encoder encodes the KB
    device: str | None = field(default=None, metadata={"help": "cpu or cuda (default: cuda when available)"})
    # of passage encoding (odqa.core.runtime.plan_inference)
    precision: str = field(
        default=INFERENCE.precision,
        metadata={
            "help": "passage encoding precision (auto: the fastest measured equal here: int8 where the encoder's int8 "
            "recall is measured, else bf16 on CPUs with native bf16, fp32 elsewhere, fp16 on a GPU; and for 50,000 "
            "passages or more with the default encoder, fast-passage-encoder; int8: ONNX Runtime dynamic int8, "
            "bench/encoder_int8.py measures its speed and "
            "recall)",
            "choices": PRECISIONS,
        },
    )

    def encoder_settings(self) -> EncoderSettings:
        """The passage encoder this build asks for (unset values: the model's own)."""
        return EncoderSettings(
            self.encoder,
            max_length=self.max_length,
            pooling=self.pooling or None,
            similarity=self.similarity or None,
            query_prefix=self.query_prefix,
            passage_prefix=self.passage_prefix,
            precision=self.precision,
            device=self.device,
            passages=True,
        )


@dataclass
class BuildReport:
    finished: bool
    passages: int
    message: str
    seconds: dict[str, float] = field(default_factory=dict)  # per stage: passages_s, bm25_s, encode_s, dense_index_s


def parse_shard(text: str | None) -> tuple[int, int] | None:
    if not text:
        return None
    try:
        i, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise OdqaError(f"--shard must look like i/n (e.g. 0/4), got {text!r}") from None
    if not (n > 0 and 0 <= i < n):
        raise OdqaError(f"--shard {text}: need 0 <= i < n")
    return i, n


def validate_spec(spec: IndexSpec) -> list[str]:
    """Check every argument before any work starts; returns the backends in order."""
    backends = list(dict.fromkeys(spec.backends))
    unknown = set(backends) - set(BACKENDS)
    if unknown or not backends:
        raise OdqaError(
            f"unknown backend(s) {', '.join(sorted(unknown)) or '(none)'}; choose from {', '.join(BACKENDS)}"
        )
    if BM25 in backends:
        require_engine(spec.bm25_engine)
    for flag, value in (
        ("--words", spec.words),
        ("--chunk-size", spec.chunk_size),
        ("--batch-size", spec.batch_size),
        ("--max-length", spec.max_length),
    ):
        if value is not None and value <= 0:
            raise OdqaError(f"{flag} must be a positive number, got {value}")
    out = Path(spec.out)
    if out.exists() and not out.is_dir():
        raise OdqaError(f"--out {out} is a file; name a folder for the index")
    corpus = Path(spec.corpus)
    if corpus.is_dir() and _within(Path(os.path.abspath(out)), Path(os.path.abspath(corpus))):
        raise OdqaError(
            f"--out {out} is inside the corpus folder {corpus}: the build would read its own index files "
            "as documents; choose an --out outside the corpus folder"
        )
    if spec.kb:
        kb_encoder(spec)  # the linker and its entity encoder are there: refused now, not after the index is built
        kb = IndexLayout(os.path.abspath(out)).kb
        if kb.exists() and not kb.is_dir():
            raise OdqaError(f"{kb}, where the index's knowledge base goes, is a file; move it away, or pass --no-kb")
    return backends


def kb_encoder(spec: IndexSpec, language: str = "") -> str:
    """The entity encoder the index's knowledge base is encoded with: that of the linker `spec.linker` (the default
    linker's unless the config names another; for a Korean or Chinese corpus, `language`, the multilingual
    linker's where it is installed, which the pipeline then links with), checked to be installed."""
    from odqa.core.models import resolve_model, shipped_model
    from odqa.linker.heads import DEFAULT_LINKER, MULTILINGUAL_LINKER

    linker = spec.linker
    if linker == DEFAULT_LINKER and language not in ("", "en") and shipped_model(MULTILINGUAL_LINKER) is not None:
        linker = MULTILINGUAL_LINKER
    try:
        encoder = LinkerSettings(model=linker).entity_encoder()
        resolve_model(encoder)
    except OdqaError as exc:
        raise OdqaError(f"{exc}; or pass --no-kb to build the index without the linker's knowledge base") from exc
    return encoder


def _within(path: Path, folder: Path) -> bool:
    """Whether `path` is `folder` or under it, symbolic links followed where they resolve."""
    try:
        path, folder = path.resolve(), folder.resolve()
    except (RuntimeError, OSError):
        pass
    return path == folder or folder in path.parents


TEXT_STAGE = "text"  # passages and BM25: `build_index(until=TEXT_STAGE)` stops there, its work folder kept
TEXT_STAGES = ("passages", "bm25")  # the crash stages (`crash_after`) of the text part


def build_index(spec: IndexSpec, crash_after: str | None = None, until: str | None = None) -> BuildReport:
    """`crash_after`: fault injection for tests only (a stage name: passages, bm25, encode, dense, fsync,
    rename-away); the process exits there as if killed. `until=TEXT_STAGE`: build the passages and BM25 in the
    work folder and stop (finished False); a later call with the same spec resumes from them, as after a crash
    (a Ray build runs the text and the encoding of a shard as separate tasks, the second on a GPU)."""
    backends = validate_spec(spec)
    out = Path(os.path.abspath(spec.out))  # `--out .` names the folder by its name, which the work folder takes
    if out.is_symlink():
        out = out.resolve()  # replace what the link points to, and keep the link
    with build_lock(out):
        recover_swap(out)
        layout = IndexLayout(out)
        if out.exists() and not layout.manifest.exists() and any(out.iterdir()):
            raise OdqaError(f"{out} exists and is not an odqa index; choose another --out or remove it")
        work = layout.work
        resumed = work.root.is_dir() and any(work.root.iterdir())
        if resumed:
            print(f"odqa: resuming the interrupted build kept in {work.root}", file=sys.stderr)
        work.root.mkdir(parents=True, exist_ok=True)

        try:
            seconds: dict[str, float] = {}
            with _timed(seconds, "passages_s"):
                store, fingerprint = _passages(spec, work)
            _maybe_crash(crash_after, "passages")
            language = corpus_language(store) if spec.language == "auto" else spec.language
            analyzer = analyzer_for(language, spec.analyzer)
            if BM25 in backends:
                _say_if_mixed(store, language, analyzer)
            if BM25 in backends:
                with _timed(seconds, "bm25_s"):
                    _bm25(spec, work, store, fingerprint, language, analyzer)
                _maybe_crash(crash_after, "bm25")
            if until == TEXT_STAGE:
                return BuildReport(False, len(store), f"passages and BM25 built in {work.root}", seconds)
            plan = None
            if DENSE in backends:  # where the passages are encoded: `auto` picks for this machine's CPU or GPU
                plan = encoding_plan(spec, work, len(store))
                unfinished = _dense_stage(spec, plan, work, store, fingerprint, seconds, crash_after)
                if unfinished is not None:
                    return unfinished

            tmp = layout.staging(os.getpid())
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir()
            try:
                parts = {}
                staged = IndexLayout(tmp)
                for part in [PASSAGES, *backends]:
                    # hard links: the work folder stays whole until the new index is in place, so a crash
                    # anywhere before the swap resumes from it
                    shutil.copytree(work.part(part), staged.part(part), copy_function=_link_or_copy)
                    parts[part] = describe_part(staged.part(part), Manifest.load(staged.part(part)).count)
                Manifest(
                    kind="bundle",
                    corpus_fingerprint=fingerprint,
                    count=len(store),
                    encoder=plan.passages.name if plan else "",
                    dim=Manifest.load(staged.dense, kind="faiss").dim if DENSE in backends else 0,
                    params={
                        "backends": backends,
                        "words": spec.words,
                        "corpus": str(spec.corpus),
                        "parts": parts,
                        **({"part": list(spec.part)} if spec.part else {}),
                        "language": language,
                        **({"analyzer": analyzer} if BM25 in backends else {}),
                        **({"query_encoder": plan.searched_with} if plan else {}),
                    },
                ).save(tmp)
                publish_folder(tmp, out, crash_after=crash_after)
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
        except Exception as exc:
            if not is_disk_full(exc):
                _drop_unfinished(work)  # what a rerun can reuse stays; a work folder of nothing goes
                raise
            kept = _drop_unfinished(work)
            raise DiskFullError(
                f"no room left on the device while building {out} ({no_room_reason(exc)})"
                + ("; the old index there is unchanged" if layout.manifest.exists() else "")
                + "; free some space and rerun"
                + (f" (the finished stages kept in {work.root}, {kept / 1e6:.1f} MB, resume the build)" if kept else "")
            ) from exc
        # before the work folder goes: a KB build interrupted now resumes from the index's finished parts
        kb = index_kb(spec, out, _kb_source(_read_record(work.source_key), spec), seconds, crash_after)
        shutil.rmtree(work.root, ignore_errors=True)
    note = " (resumed from the work folder of an interrupted build)" if resumed else ""
    return BuildReport(
        True,
        len(store),
        f"index ready in {out}: {len(store)} passages, backends {', '.join(backends)}{note}{kb}",
        seconds,
    )


def _dense_stage(
    spec: IndexSpec,
    plan: EncodingPlan,
    work: IndexLayout,
    store: PassageStore,
    fingerprint: str,
    seconds: dict[str, float],
    crash_after: str | None,
) -> BuildReport | None:
    """Encode the passages and build the dense part in the work folder as `plan` says; the report of a build that
    stops here (a shard's chunks done, the rest left to the other shards), else None."""
    if IndexLayout(work.dense).manifest.exists():
        # a dense part finished by an interrupted run of the same settings (encoding_plan checked them) is kept
        # whole: nothing is encoded again
        if spec.shard:
            return BuildReport(
                False,
                len(store),
                f"every chunk is encoded and merged in {work.root}; rerun without --shard to finish",
                seconds,
            )
        return None
    with _timed(seconds, "encode_s"):
        done, total = _encode_chunks(spec, plan, work, store)
    _maybe_crash(crash_after, "encode")
    if done < total:
        assert spec.shard is not None  # only a shard leaves chunks to the others
        return BuildReport(
            False,
            len(store),
            f"shard {spec.shard[0]}/{spec.shard[1]} finished: {done} of {total} "
            f"chunks encoded in {work.root}; run the other shards, then rerun without --shard to finish",
            seconds,
        )
    with _timed(seconds, "dense_index_s"):
        _dense(spec, plan, work, store, fingerprint, total)
    _maybe_crash(crash_after, "dense")
    return None


def _kb_source(record: dict | None, spec: IndexSpec) -> dict:
    """What the index's knowledge base is made of, as its manifest records it (`source`): the corpus files' sizes
    and content digests (not their paths: a corpus moved elsewhere is the same corpus) and the columns read."""
    files = (record or {}).get("source", {}).get("files") or _source_key(spec)["files"]
    return {"files": [[size, digest] for _, size, digest in files], "fields": list(vars(spec.fields).values())}


def kb_source(corpora: Sequence[str | Path], fields: CorpusFields, limit: int | None = None) -> dict:
    """`source` of a knowledge base built from `corpora` (`build-kb`; `limit`: its first documents only)."""
    files = [f for corpus in corpora for source in corpus_sources(corpus) for f in corpus_files(source)]
    return {
        "files": [[f.stat().st_size, content_digest(f)] for f in files],
        "fields": list(vars(fields).values()),
        **({"limit": limit} if limit else {}),
    }


def index_kb(
    spec: IndexSpec, out: Path, source: dict, seconds: dict[str, float], crash_after: str | None = None
) -> str:
    """Build the knowledge base beside the index `out` from its corpus (`spec.kb`), unless the one there was built
    from the same `source` by the same entity encoder; returns what the build report says of it."""
    from odqa.linker.kb import KnowledgeBase, NoEntities

    path = IndexLayout(os.path.abspath(spec.out)).kb  # beside the path named (a link to an index: beside the link)
    if not spec.kb:
        if _kb_stale(path, source, "") == OTHER_CORPUS:  # left as it is, as --no-kb says, but ask would use it
            log.warning("the knowledge base %s %s; remove it", path, OTHER_CORPUS)
        return ""
    encoder = kb_encoder(spec, _index_language(out))
    why = _kb_stale(path, source, encoder)
    if why is None:
        return f"; knowledge base {path} kept (built from the same corpus)"
    log.info("knowledge base %s %s: building it (--no-kb skips it)", path, why)

    def documents():
        files = corpus_part(spec.corpus, spec.part)
        for number, doc in enumerate(doc for file in files for doc in iter_documents(file, fields=spec.fields)):
            if number == 1:
                _maybe_crash(crash_after, "kb")
            yield doc

    try:
        with _timed(seconds, "kb_s"):
            kb = KnowledgeBase.build(
                tqdm(documents(), desc="kb documents", unit=" doc", mininterval=2),
                path,
                encoder=encoder,
                device=spec.device,
                params={"source": source},
            )
    except NoEntities:
        there = f"; the one in {path} is of another corpus: remove it" if path.exists() else ""
        return f"; no knowledge base: no document has a title to make an entity of{there}"
    except Exception as exc:
        if not isinstance(exc, OdqaError) and not is_disk_full(exc):
            raise
        # the old KB is untouched (KnowledgeBase.write replaces it whole or not at all), the new index in place
        told = str(exc) if isinstance(exc, OdqaError) else f"no room left on the device ({no_room_reason(exc)})"
        error = DiskFullError if is_disk_full(exc) else OdqaError
        raise error(
            f"the knowledge base {path} was not built: {told}; the index {out} is ready: rerun the same command to "
            "build its knowledge base (or pass --no-kb)"
        ) from exc
    return f"; knowledge base {path}: {len(kb)} entities ({', '.join(kb.language_names)})"


OTHER_CORPUS = "was built from another corpus"


def _index_language(out: Path) -> str:
    """The language the built index `out` records ("" where it records none)."""
    try:
        language = Manifest.load(out).params.get("language")
    except OdqaError:
        return ""
    return language if isinstance(language, str) else ""


def _kb_stale(path: Path, source: dict, encoder: str) -> str | None:
    """None when the KB at `path` was built from `source` by `encoder` (empty: any) with its alias keys made as
    they are now; else what differs, as a predicate of the KB."""
    from odqa.linker.kb import KnowledgeBase

    if not path.exists():
        return "is not there yet"
    try:
        kb = KnowledgeBase.load(path)
    except OdqaError as exc:
        return f"cannot be used ({exc})"
    if kb.source is None:
        return "records no corpus it was built from"
    if kb.source != source:
        return OTHER_CORPUS
    if encoder and kb.encoder != encoder:
        return f"was encoded with {kb.encoder!r}, and the linker's entity encoder is {encoder!r}"
    if kb.check_alias_scheme():
        return "has its alias keys made otherwise than now"
    return None


@contextlib.contextmanager
def _timed(seconds: dict[str, float], key: str):
    start = time.perf_counter()
    try:
        yield
    finally:
        seconds[key] = round(time.perf_counter() - start, 2)


def _maybe_crash(crash_after: str | None, stage: str) -> None:
    if crash_after == stage:
        os._exit(137)


def _drop_unfinished(work: IndexLayout) -> int:
    """After a failed write, keep only the finished stages of `work` (passages with their source key, a
    BM25 or dense part with its manifest, encoded chunks): the partial files of the stage that failed go, so
    they give their space back and a rerun redoes that stage. Returns the bytes kept (0: nothing, and `work`
    is gone)."""
    if not work.source_key.exists():
        shutil.rmtree(work.passages, ignore_errors=True)
    for part in (work.bm25, work.dense):
        if not (part / MANIFEST).exists():
            shutil.rmtree(part, ignore_errors=True)
    if not (work.dense / MANIFEST).exists():
        work.merged_embeddings.unlink(missing_ok=True)  # the merge of the chunks, half written
    for folder in (work.root, work.dense_chunks):
        for leftover in folder.glob(".*") if folder.is_dir() else ():
            # temporary files and folders, a library's threads perhaps still tidying them
            remove_tree(leftover) if leftover.is_dir() else leftover.unlink(missing_ok=True)
    if work.dense_chunks.is_dir() and not any(work.dense_chunks.glob("chunk-*.npy")):
        remove_tree(work.dense_chunks)
    if not work.root.is_dir():
        return 0
    if not work.source_key.exists():
        remove_tree(work.root)  # without finished passages nothing else can be reused
        return 0
    return tree_bytes(work.root)


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def corpus_part(corpus: str | Path, part: tuple[int, int] | None) -> list[Path]:
    """The corpus sources (files; a `datasets` folder counts as one) that `part` (i, n) names: the i-th of n
    consecutive groups, as even in count as they divide; all of them where `part` is None."""
    sources = corpus_sources(corpus)
    if part is None:
        return sources
    i, n = part
    if len(sources) < n:
        raise OdqaError(
            f"--shards {n} needs a corpus of at least {n} files, and {corpus} has {len(sources)}: split "
            "it into files (one shard takes whole files) or ask for fewer shards"
        )
    return [Path(p) for p in np.array_split(np.array([str(s) for s in sources], dtype=object), n)[i]]


def _source_key(spec: IndexSpec) -> dict:
    """What the finished passages of a work folder were made from: each corpus file's content digest (not its
    size and time, which a file replaced within the same second, or copied with its times, keeps), and the
    settings that split it."""
    files = [f for source in corpus_part(spec.corpus, spec.part) for f in corpus_files(source)]
    return {
        "files": [[str(f.resolve()), f.stat().st_size, content_digest(f)] for f in files],
        "words": spec.words,
        "fields": [spec.fields.id, spec.fields.title, spec.fields.text],
    }


def content_digest(path: Path, block: int = 1 << 20) -> str:
    """xxh3-128 of a file's bytes (compressed files as stored), read in blocks: a corpus is read whole at every
    build, at a small fraction of what splitting it into passages costs."""
    digest = xxhash.xxh3_128()
    with open(path, "rb") as f:
        while chunk := f.read(block):
            digest.update(chunk)
    return digest.hexdigest()


def _read_record(path: Path) -> dict | None:
    """A small JSON record the build keeps in its work folder; None where it is missing or damaged (a crash
    while it was written), which only costs the stage it vouches for."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def _passages(spec: IndexSpec, work: IndexLayout) -> tuple[PassageStore, str]:
    from odqa.corpus.store import PassageStore

    key = _source_key(spec)
    marker = work.source_key
    saved = _read_record(marker) if (work.passages / "passages.arrow").exists() else None
    if saved and saved.get("source") == key and "fingerprint" in saved:
        return PassageStore.open(work.passages), saved["fingerprint"]
    shutil.rmtree(work.root, ignore_errors=True)  # another corpus: nothing in the work folder is valid
    work.root.mkdir(parents=True)
    sources = corpus_part(spec.corpus, spec.part)
    passages = tqdm(
        itertools.chain.from_iterable(
            iter_passages(source, words=spec.words, fields=spec.fields) for source in sources
        ),
        desc="passages",
        unit=" psg",
        mininterval=2,
    )
    store, fingerprint = PassageStore.write(passages, work.passages)
    Manifest(
        kind="passages",
        corpus_fingerprint=fingerprint,
        count=len(store),
        params={"words": spec.words, "layout": store.layout_digest()},
    ).save(work.passages)
    marker.write_text(json.dumps({"source": key, "fingerprint": fingerprint}))
    return store, fingerprint


def passage_texts(store: PassageStore, desc: str):
    """Every passage as BM25 indexes it (title, a space, text), with a progress bar named `desc`."""
    with tqdm(total=len(store), desc=desc, unit=" psg", mininterval=2) as bar:
        for batch in store.iter_batches(5000):
            for title, text in zip(batch["title"], batch["text"]):
                yield f"{title} {text}"
            bar.update(len(batch["text"]))


def corpus_language(store: PassageStore, sample: int = 500) -> str:
    """en, ko or zh from the scripts of the first `sample` passages."""
    rows = store.dataset[:sample]
    return detect_language([f"{t} {x}" for t, x in zip(rows["title"], rows["text"])])


# a corpus is one language's to BM25 (one analyser for every passage and question); a sample of passages with
# more than this share in other languages gets a notice at index time
MIXED_SHARE = 0.05
MIXED_SAMPLE = 1000


def language_shares(store: PassageStore, sample: int = MIXED_SAMPLE) -> dict[str, float]:
    """The share of each language (en, ko, zh) among `sample` passages spread evenly over the store."""
    count = len(store)
    if count == 0:
        return {}
    taken = min(sample, count)
    rows = sorted({round(i * (count - 1) / max(1, taken - 1)) for i in range(taken)})
    picked = store.dataset[rows]
    found = Counter(detect_language([f"{t} {x}"]) for t, x in zip(picked["title"], picked["text"]))
    return {language: n / len(rows) for language, n in found.most_common()}


def _say_if_mixed(store: PassageStore, language: str, analyzer: str) -> None:
    """A notice where a corpus mixes languages: BM25 analyses every passage as `language` (one analyser per index,
    so that a question's terms and a passage's are made alike), and passages of another script are found only
    by whole words of theirs, their particles and compounds unsplit."""
    others = {code: share for code, share in language_shares(store).items() if code != language}
    if sum(others.values()) <= MIXED_SHARE:
        return
    mix = ", ".join(f"{share:.0%} {LANGUAGE_NAMES[code]}" for code, share in others.items())
    print(
        f"odqa: note: the corpus mixes languages ({mix} of a sample of its passages, the rest "
        f"{LANGUAGE_NAMES[language]}); BM25 analyses all of it as {LANGUAGE_NAMES[language]} ({analyzer}), so "
        "passages in the other languages are found by whole words only; index each language apart "
        "(--language ko|zh|en on a corpus of that language) for BM25 to find them all",
        file=sys.stderr,
    )


def _bm25(
    spec: IndexSpec, work: IndexLayout, store: PassageStore, fingerprint: str, language: str, analyzer: str
) -> None:
    if IndexLayout(work.bm25).manifest.exists():
        if Manifest.load(work.bm25).params.get("analyzer", "en") == analyzer:
            return
        shutil.rmtree(work.bm25)  # built with another analyser by an earlier run
    manifest = Manifest(kind="bm25", corpus_fingerprint=fingerprint)
    params = {} if analyzer == "en" else {"analyzer": analyzer, "language": language}
    build_text_index(passage_texts(store, "bm25"), work.bm25, manifest, engine=spec.bm25_engine, **params)


def _encode_chunks(spec: IndexSpec, plan: EncodingPlan, work: IndexLayout, store: PassageStore) -> tuple[int, int]:
    chunks = work.dense_chunks
    chunks.mkdir(exist_ok=True)
    total = (len(store) + spec.chunk_size - 1) // spec.chunk_size
    mine = [c for c in range(total) if spec.shard is None or c % spec.shard[1] == spec.shard[0]]
    todo = [c for c in mine if not (chunks / f"chunk-{c:05d}.npy").exists()]
    if todo:
        encoder = plan.load_encoder()
        remaining = sum(min(spec.chunk_size, len(store) - c * spec.chunk_size) for c in todo)
        _suggest_fast_encoder(encoder, remaining)
        with tqdm(total=remaining, desc="encode", unit=" psg", mininterval=2) as bar:
            for c in todo:
                rows = store.dataset[c * spec.chunk_size : (c + 1) * spec.chunk_size]
                texts = list(zip(rows["title"], rows["text"]))
                vectors = encoder.encode_passages(texts, batch_size=spec.batch_size, on_batch=bar.update)
                tmp = chunks / f".chunk-{c:05d}.tmp.npy"
                write_npy(tmp, vectors.astype(np.float16))  # fp16 halves disk; search upcasts
                tmp.replace(chunks / f"chunk-{c:05d}.npy")
    done = sum((chunks / f"chunk-{c:05d}.npy").exists() for c in range(total))
    return done, total


FAST_PASSAGE_ENCODER = "fast-passage-encoder"  # models/fast-passage-encoder: writes DEFAULT_ENCODER's vectors
LARGE_BUILD = 50_000  # passages: below this the build takes minutes either way


@dataclass(frozen=True)
class EncodingPlan:
    """What a build encodes its passages with, decided once (`encoding_plan`) and passed down to the encoding,
    the work folder's record and the manifests: the passage encoder's settings, the precision it runs in (`auto`
    made concrete for this machine) and the question encoder recorded for search ("": the passage encoder)."""

    passages: EncoderSettings
    precision: str
    query_encoder: str = ""

    @property
    def searched_with(self) -> str:
        return self.query_encoder or self.passages.name

    def load_encoder(self):
        """The passage encoder. `auto` may encode passages in int8 where their int8 recall was measured
        (`int8_measured(..., passages=True)`), though questions stay in the precision search gives them."""
        from odqa.core.encoder_loading import load_text_encoder

        return load_text_encoder(self.passages)

    def recorded_settings(self) -> dict:
        """The passage encoder's resolved settings the manifest records (read from the model files on the CPU),
        so that search encodes questions the same way."""
        from odqa.core.encoder_loading import load_text_encoder

        return load_text_encoder(replace(self.passages, device="cpu", precision=INFERENCE.precision)).settings()

    def key(self, chunk_size: int) -> dict:
        """Everything the passage vectors depend on: chunks and a dense part are reused only under the same key.
        Chunks of one build share a precision (int8 vectors differ slightly from fp32 ones)."""
        settings = self.passages
        return {
            "encoder": settings.name,
            "chunk_size": chunk_size,
            "max_length": settings.max_length,
            "weights": model_fingerprint(settings.name),
            "pooling": settings.pooling,
            "similarity": settings.similarity,
            "query_prefix": settings.query_prefix,
            "passage_prefix": settings.passage_prefix,
            "precision": self.precision,
        }


def asked_plan(spec: IndexSpec) -> EncodingPlan:
    """The plan `spec` asks for, its encoder resolved to a folder once: its passage length (unset: the encoder's
    own), its question encoder (unset: the one the passage encoder names, a distilled student's teacher) and the
    precision its `auto` means on this machine, before the build's size is known (`encoding_plan`)."""
    from odqa.core.models import resolve_model
    from odqa.core.text_encoding import folder_max_length, read_retriever_info

    settings = spec.encoder_settings()
    folder = resolve_model(settings.name)
    info = read_retriever_info(folder)
    if settings.max_length is None:
        settings = replace(settings, max_length=folder_max_length(folder))
    return EncodingPlan(settings, passage_precision(settings, info), spec.query_encoder or info.query_encoder or "")


def passage_precision(settings: EncoderSettings, info: RetrieverInfo | None = None) -> str:
    """The precision the passage encoder `settings` runs in (`auto` made concrete), without loading it; `info`:
    its retriever_info.json, where the caller has read it."""
    from odqa.core.device import device_type
    from odqa.core.runtime import plan_inference
    from odqa.core.text_encoding import retriever_info

    info = info or retriever_info(settings.name)
    inference = InferenceSettings(settings.precision, settings.runtime)
    return plan_inference(device_type(settings.device), inference, auto_int8=info.allows_int8(passages=True)).precision


def auto_passage_encoder(plan: EncodingPlan, passages: int) -> EncodingPlan:
    """Under `--precision auto`, a large build with the default encoder on a CPU where it would run fp32 or int8
    (every CPU with onnxruntime: its passages' int8 is measured) encodes its passages with the distilled 4-layer
    student, whose recall was measured level with the 6-layer encoder's (models/fast-passage-encoder/README.md) at
    about 1.4x its int8 speed; its vectors are searched with the same question encoder. An explicit precision keeps the
    encoder asked for; small builds keep it too (minutes either way)."""
    from odqa.core.device import device_type
    from odqa.core.text_encoding import paired_query_encoder

    asked = plan.passages
    if asked.precision != "auto" or device_type(asked.device) != "cpu":
        return plan
    if not _fast_encoder_serves(asked.name, passages, plan.precision):
        return plan
    student = replace(asked, name=FAST_PASSAGE_ENCODER)
    fast = EncodingPlan(student, passage_precision(student), paired_query_encoder(FAST_PASSAGE_ENCODER))
    print(
        f"odqa: {passages:,} passages on this CPU: `auto` encodes them with {FAST_PASSAGE_ENCODER} "
        f"({fast.precision}; distilled from {DEFAULT_ENCODER}, searched with its questions, recall "
        f"measured level: models/{FAST_PASSAGE_ENCODER}/README.md); "
        f"--precision {plan.precision} keeps {DEFAULT_ENCODER}",
        file=sys.stderr,
        flush=True,
    )
    return fast


def _fast_encoder_serves(encoder: str, passages: int, cpu_precision: str) -> bool:
    """A large CPU build with the default encoder, which would run in `cpu_precision` there: where the distilled
    student is the faster way to write the same vectors (no native bf16 for the 6-layer model)."""
    return encoder == DEFAULT_ENCODER and passages >= LARGE_BUILD and cpu_precision in ("fp32", "int8")


def _suggest_fast_encoder(encoder, passages: int) -> None:
    """Where the default encoder runs fp32 or int8 on a CPU (int8 under `auto`, or fp32 asked for) at a
    precision asked for (`auto` switches by itself: `auto_passage_encoder`), a large build with it is told of the
    shipped distilled passage encoder, which writes the same vector space faster (its card gives speed and
    recall)."""
    precision = encoder.plan().precision
    if encoder.device_type != "cpu" or not _fast_encoder_serves(encoder.name, passages, precision):
        return
    print(
        f"odqa: {passages:,} passages to encode in {precision} on this CPU; `--encoder {FAST_PASSAGE_ENCODER}` "
        f"(distilled from {DEFAULT_ENCODER}, searched with its questions; what `--precision auto` picks here) "
        f"encodes them faster at recall measured level (models/{FAST_PASSAGE_ENCODER}/README.md)",
        file=sys.stderr,
        flush=True,
    )


def encoding_plan(spec: IndexSpec, work: IndexLayout, passages: int) -> EncodingPlan:
    """The passage encoder and precision this build encodes with, decided here once and checked against the work
    folder's record.

    A rerun of the same command resumes with what the interrupted run chose, recorded in `work.encoding`: its
    `--precision auto` may choose otherwise now (another machine, onnxruntime installed since), and the finished chunks
    and dense part would be of no use. A record of other settings given explicitly is refused, naming them,
    since a shared work folder may hold other machines' shards."""
    asked = {"encoder": spec.encoder, "precision": spec.precision, "device": spec.device or ""}
    plan = asked_plan(spec)
    saved = _read_record(work.encoding)
    encoded = (work.dense_chunks.is_dir() and any(work.dense_chunks.glob("chunk-*.npy"))) or IndexLayout(
        work.dense
    ).manifest.exists()
    if saved and saved.get("asked") == asked and spec.precision == "auto":
        plan = _resumed_plan(plan, saved, work, encoded)
    elif spec.precision == "auto":
        plan = auto_passage_encoder(plan, passages)
    key = plan.key(spec.chunk_size)
    if saved and {name: saved.get(name) for name in key} != key:
        if not encoded:
            saved = None  # nothing encoded under the old settings yet
        else:
            differ = ", ".join(
                f"{name} {saved.get(name)!r} (now {value!r})" for name, value in key.items() if saved.get(name) != value
            )
            raise OdqaError(
                f"{work.root} holds passages encoded with other settings: {differ}; rerun with the "
                f"settings it was started with to resume it, or remove {work.dense_chunks} and "
                f"{work.dense} to encode again with these"
            )
    if not saved:
        shutil.rmtree(work.dense, ignore_errors=True)
        shutil.rmtree(work.dense_chunks, ignore_errors=True)
        work.encoding.write_text(json.dumps({"asked": asked, "query_encoder": plan.query_encoder, **key}))
    return plan


def _resumed_plan(plan: EncodingPlan, saved: dict, work: IndexLayout, encoded: bool) -> EncodingPlan:
    """The plan an interrupted `--precision auto` build recorded (`saved`): its passage encoder, question encoder
    and precision."""
    passages = replace(plan.passages, name=saved["encoder"])
    precision = passage_precision(passages)
    if saved.get("precision") != precision:
        passages, precision = replace(passages, precision=saved["precision"]), saved["precision"]
    resumed = EncodingPlan(passages, precision, saved.get("query_encoder") or plan.query_encoder)
    if encoded:
        print(
            f"odqa: resuming with the passages encoded by {saved['encoder']} in precision {saved['precision']}, "
            f"as `--precision auto` chose when this build started (recorded in {work.encoding})",
            file=sys.stderr,
            flush=True,
        )
    return resumed


def _dense(
    spec: IndexSpec, plan: EncodingPlan, work: IndexLayout, store: PassageStore, fingerprint: str, total: int
) -> None:
    if IndexLayout(work.dense).manifest.exists():
        return
    chunks = work.dense_chunks
    first = np.load(chunks / "chunk-00000.npy", mmap_mode="r")
    merged_path = work.merged_embeddings

    def parts():
        for c in range(total):
            part = np.load(chunks / f"chunk-{c:05d}.npy", mmap_mode="r")
            if len(part) != min(spec.chunk_size, len(store) - c * spec.chunk_size):
                raise OdqaError(
                    f"{chunks}/chunk-{c:05d}.npy holds {len(part)} vectors, not those of its passages; "
                    f"remove it and rerun to encode it again"
                )
            yield part

    # written, not memory-mapped: a full disk is then an error to report, not SIGBUS
    write_npy_blocks(merged_path, np.float16, (len(store), first.shape[1]), parts())
    encoder = plan.passages.name
    manifest = Manifest(
        kind="faiss",
        corpus_fingerprint=fingerprint,
        encoder=encoder,
        params={
            "max_length": plan.passages.max_length,
            "encoder_weights": model_fingerprint(encoder),
            "query_encoder": plan.searched_with,
            "passage_precision": plan.precision,
            "encoder_settings": plan.recorded_settings(),
        },
    )
    VectorIndex.build(merged_path, work.dense, manifest, spec.vector)
    shutil.rmtree(chunks, ignore_errors=True)


def build_sharded_index(
    spec: IndexSpec, shards: int, cluster: Cluster | None = None, crash: ShardCrash | None = None
) -> BuildReport:
    """`index --shards N`: the corpus's files in N consecutive groups, each indexed as a whole index folder
    `OUT/shards/NNN` (resumable as any build; a rerun keeps the shards finished from the same files and settings),
    then their BM25 segments joined into `OUT/bm25` and `OUT/manifest.json` written: one index to search
    (indexes.folder.ShardedFolderIndex; indexes/shards.py). `cluster` (`index --ray`): the shards are built as Ray
    tasks on its workers, in parallel, into the same folders; the index is the one this process would build.
    `crash`: fault injection for tests only."""
    from odqa.indexes.shards import union_text_index

    if shards < 1:
        raise OdqaError(f"--shards must be a positive number, got {shards}")
    if spec.shard is not None:
        raise OdqaError(
            "--shard i/n (encoding chunks) and --shards N (index parts) do not combine; build without --shard"
        )
    backends = validate_spec(spec)
    if BM25 in backends and spec.bm25_engine != "tantivy":
        raise OdqaError(
            f"--shards needs the tantivy BM25 engine (its shards' segments are searched as one index), "
            f"not {spec.bm25_engine}: drop --bm25-engine or pass --bm25-engine tantivy"
        )
    corpus_part(spec.corpus, (0, shards))  # enough files: refused before any work
    out = Path(spec.out)
    layout = IndexLayout(out)
    if layout.manifest.exists() and not _sharded(out):
        raise OdqaError(f"{out} holds an index built in one piece; choose another --out or remove it")
    if out.exists() and not layout.manifest.exists() and any(p.name != "shards" for p in out.iterdir()):
        raise OdqaError(f"{out} exists and is not an odqa index; choose another --out or remove it")
    names = [_shard_name(i) for i in range(shards)]
    seconds: dict[str, float] = {}
    with build_lock(out, parts_by_workers=cluster is not None):  # the workers write the shards inside
        if cluster is None:
            _build_shards_here(spec, out, names, seconds)
        else:
            _build_shards_on(cluster, spec, out, names, backends, seconds, crash)
        bundles = [Manifest.load(out / name, kind="bundle") for name in names]
        counts = [bundle.count for bundle in bundles]
        fingerprint = hashlib.sha1(" ".join(b.corpus_fingerprint for b in bundles).encode()).hexdigest()[:16]
        starts = np.cumsum([0] + counts).tolist()
        # each shard by its manifest's digest (which records its parts' digests) and rows: a shard swapped with
        # another, or one of another build, is refused at open (indexes.integrity.check_shard)
        records = {
            name: {"manifest": bundle.digest, "rows": [starts[i], starts[i + 1]]}
            for i, (name, bundle) in enumerate(zip(names, bundles))
        }
        parts = {}
        if BM25 in backends:
            with _timed(seconds, "bm25_union_s"):
                offsets = np.cumsum([0] + counts[:-1]).tolist()
                union_text_index([out / name / BM25 for name in names], offsets, layout.bm25, fingerprint)
                parts[BM25] = describe_part(layout.bm25, sum(counts))
        first = bundles[0].params
        Manifest(
            kind="bundle",
            corpus_fingerprint=fingerprint,
            count=sum(counts),
            encoder=bundles[0].encoder,
            dim=bundles[0].dim,
            params={
                "backends": backends,
                "words": spec.words,
                "corpus": str(spec.corpus),
                "parts": parts,
                SHARDS: names,
                SHARD_RECORDS: records,
                **{k: first[k] for k in ("language", "analyzer", "query_encoder") if k in first},
            },
        ).save(out)
        # one knowledge base for the whole index, beside its top folder (the shards' sources in order make it)
        keys = [_read_record(out / f"{name}.source.json") or {} for name in names]
        files = [row for key in keys for row in key.get("source", {}).get("files", [])]
        kb = index_kb(spec, out, _kb_source({"source": {"files": files}} if all(keys) else None, spec), seconds)
    return BuildReport(
        True,
        sum(counts),
        f"index ready in {out}: {sum(counts)} passages in {shards} shards, backends {', '.join(backends)}{kb}",
        seconds,
    )


def _shard_spec(spec: IndexSpec, out: Path, i: int, shards: int, language: str) -> IndexSpec:
    vector = replace(spec.vector)  # a build may set its nlist: each shard its own
    # the knowledge base is the whole index's, beside it
    return replace(spec, out=str(out / _shard_name(i)), part=(i, shards), language=language, vector=vector, kb=False)


def _shard_name(i: int) -> str:
    return f"{SHARDS}/{i:03d}"


def _shard_wanted(shard_spec: IndexSpec) -> dict:
    """What a shard's record must say for a rerun to keep it: its files' content and its settings."""
    return {"source": _source_key(shard_spec), "spec": _shard_settings(shard_spec)}


def _shard_key(out: Path, name: str) -> Path:
    """The record of what shard `name` was built from (`_shard_kept`)."""
    return out / f"{name}.source.json"


def _record_shard(out: Path, name: str, wanted: dict) -> None:
    """After a shard is built: its record, with its manifest's digest (a rerun keeps only this very shard, not one
    swapped into its place)."""
    digest = Manifest.load(out / name, kind="bundle").digest
    _shard_key(out, name).write_text(json.dumps({**wanted, "manifest": digest}))


def _add_seconds(seconds: dict[str, float], more: dict[str, float]) -> None:
    for stage, value in more.items():
        seconds[stage] = round(seconds.get(stage, 0.0) + value, 2)


def _build_shards_here(spec: IndexSpec, out: Path, names: list[str], seconds: dict[str, float]) -> None:
    """Each shard in turn in this process; each after the first takes the language its predecessor found."""
    shards = len(names)
    language = spec.language
    for i, name in enumerate(names):
        shard_spec = _shard_spec(spec, out, i, shards, language)
        key = _shard_key(out, name)
        wanted = _shard_wanted(shard_spec)
        if _shard_kept(out / name, key, wanted, (i, shards), str(spec.corpus)):
            print(f"odqa: shard {i + 1}/{shards} kept: built earlier from the same files", file=sys.stderr)
        else:
            key.unlink(missing_ok=True)
            print(f"odqa: shard {i + 1}/{shards}", file=sys.stderr, flush=True)
            _add_seconds(seconds, build_index(shard_spec).seconds)
            _record_shard(out, name, wanted)
        language = Manifest.load(out / name, kind="bundle").params.get("language", language)


@dataclass(frozen=True)
class ShardCrash:
    """Fault injection for tests: shard `shard`'s task kills its worker at `stage` (a `build_index` crash stage),
    only where the file `once` does not exist yet (it is created first), so that the retry goes through."""

    shard: int
    stage: str
    once: str


def build_shard(spec: IndexSpec, until: str | None = None, crash: ShardCrash | None = None) -> BuildReport:
    """One shard's task on a Ray worker: `build_index`, resumed from the shard's work folder where a worker lost
    before left it."""
    crash_after = None
    if crash is not None and not Path(crash.once).exists():
        Path(crash.once).touch()
        crash_after = crash.stage
    return build_index(spec, crash_after=crash_after, until=until)


def _first_language(spec: IndexSpec, shards: int, sample: int = 500) -> str:
    """The language `corpus_language` finds in the first shard's passages, from its first `sample` passages read
    here: every shard after the first is built with it, as `_build_shards_here` builds them."""
    sources = corpus_part(spec.corpus, (0, shards))
    passages = itertools.islice(
        itertools.chain.from_iterable(iter_passages(s, words=spec.words, fields=spec.fields) for s in sources), sample
    )
    return detect_language([f"{p.title} {p.text}" for p in passages])


def _build_shards_on(
    cluster: Cluster,
    spec: IndexSpec,
    out: Path,
    names: list[str],
    backends: list[str],
    seconds: dict[str, float],
    crash: ShardCrash | None,
) -> None:
    """The shards not kept as Ray tasks: per shard a text task (passages and BM25, a CPU) and, with dense vectors, an
    encoding task after it (a GPU where the cluster has them), each writing the shard's folder as `build_index`
    does here; every shard is recorded as it finishes, so a rerun after a crash keeps it."""
    from odqa.core.cluster import Task

    shards = len(names)
    first: str | None = None
    if spec.language == "auto":
        kept_first = out / names[0] / MANIFEST
        first = Manifest.load(out / names[0], kind="bundle").params.get("language") if kept_first.exists() else None
        first = first or _first_language(spec, shards)
    tasks: list[Task] = []
    wanted: dict[str, tuple[str, dict]] = {}
    for i, name in enumerate(names):
        shard_spec = _shard_spec(spec, out, i, shards, spec.language if i == 0 or first is None else first)
        key = _shard_key(out, name)
        shard_wanted = _shard_wanted(shard_spec)
        if _shard_kept(out / name, key, shard_wanted, (i, shards), str(spec.corpus)):
            print(f"odqa: shard {i + 1}/{shards} kept: built earlier from the same files", file=sys.stderr)
            continue
        key.unlink(missing_ok=True)
        fault = crash if crash is not None and crash.shard == i else None
        label = f"shard {i + 1}/{shards}"
        if DENSE in backends:
            text_fault = fault if fault is not None and fault.stage in TEXT_STAGES else None
            vectors_fault = fault if fault is not None and fault.stage not in TEXT_STAGES else None
            tasks.append(Task(f"{label} text", build_shard, (shard_spec, TEXT_STAGE, text_fault)))
            tasks.append(
                Task(
                    f"{label} vectors",
                    build_shard,
                    (shard_spec, None, vectors_fault),
                    gpu=True,
                    after=(tasks[-1].name,),
                )
            )
        else:
            tasks.append(Task(label, build_shard, (shard_spec, None, fault)))
        wanted[tasks[-1].name] = (name, shard_wanted)
    if not tasks:
        return
    print(
        f"odqa: {len(wanted)} of {shards} shards to build, as {len(tasks)} tasks on {cluster.describe()}",
        file=sys.stderr,
        flush=True,
    )

    def finished(task, report: BuildReport) -> None:
        _add_seconds(seconds, report.seconds)
        if task.name in wanted:
            name, shard_wanted = wanted[task.name]
            _record_shard(out, name, shard_wanted)

    cluster.run(tasks, "index shards", on_done=finished)


def ray_shards(spec: IndexSpec, cluster: Cluster) -> int:
    """`index --ray` without --shards: one shard per task the cluster runs at once, at most one per corpus file
    (a shard takes whole files). Said on the terminal, since a rerun keeps the shards only of the same count."""
    files = len(corpus_part(spec.corpus, None))
    shards = min(files, cluster.slots)
    why = "one per corpus file" if shards == files else f"one per {'GPU' if cluster.gpus else 'CPU'} of the cluster"
    print(
        f"odqa: --ray builds {shards} shard{'s' if shards > 1 else ''} ({why}; --shards N to choose"
        + ("; split the corpus into files to build it in parallel" if files == 1 else "")
        + ")",
        file=sys.stderr,
        flush=True,
    )
    return shards


def _sharded(out: Path) -> bool:
    """Whether the index in `out` was built as shards: its manifest says so, or where it cannot be read (a
    damaged one, which this build replaces), its shards folder."""
    try:
        return bool(Manifest.load(out).params.get(SHARDS))
    except OdqaError:
        return (out / SHARDS).is_dir()


def _shard_kept(folder: Path, key: Path, wanted: dict, part: tuple[int, int], corpus: str) -> bool:
    """Whether the shard in `folder` is the one an earlier run built from the same files and settings (`wanted`,
    recorded in `key`), so that a rerun keeps it: its manifest reads whole and is the one recorded there when it
    was built (a record of before the digest: the shard says it is this part of this corpus), never a shard swapped
    into its place or copied from another build."""
    saved = _read_record(key) if key.exists() else None
    if not saved or {k: v for k, v in saved.items() if k != "manifest"} != wanted:
        return False
    try:
        manifest = Manifest.load(folder, kind="bundle")
    except OdqaError:
        return False
    if "manifest" in saved:
        return manifest.digest == saved["manifest"]
    return manifest.params.get("part") == list(part) and manifest.params.get("corpus") == corpus


def _shard_settings(spec: IndexSpec) -> dict:
    """What a shard was built with, beyond its files: a rerun with other settings rebuilds it."""
    ignored = ("out", "device", "batch_size", "fields", "vector", "kb", "linker")  # the KB is the whole index's
    settings = {k: v for k, v in vars(spec).items() if k not in ignored}
    return json.loads(json.dumps({**settings, "fields": vars(spec.fields), "vector": vars(spec.vector)}, default=str))
