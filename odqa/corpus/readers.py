"""Read corpora in the formats users download.

* JSON Lines (plain, .gz, .xz, .bz2): `{id, title, text}` (Wikipedia dumps converted by WikiExtractor --json,
  our shared subset) or Pyserini's `{id, contents}`.
* WikiExtractor output folders: files of `<doc id=".." url=".." title="..">` blocks (plain or .bz2).
* DPR passage TSV (`id<TAB>text<TAB>title`, DPR's header or none): already passages, kept as they are.
* SQuAD JSON: each paragraph is a document.
* Tables, read in record batches by pyarrow and `datasets` (memory stays bounded): a Hugging Face `datasets`
  folder (`Dataset.save_to_disk`; of a `DatasetDict`, its only split or its `corpus` split), Parquet, Arrow
  (IPC file or stream, Feather), CSV and TSV with a header row. BEIR's `corpus.jsonl` (`_id`, `title`, `text`)
  and Pyserini's JSONL (`id`, `contents`) are JSON Lines of the same fields; a BEIR folder is read as its
  `corpus.jsonl` alone (its `queries.jsonl` and `qrels/` are no documents).
Which column holds the id, title and text is `CorpusFields` (`index --id-field/--title-field/--text-field`,
config `[corpus]`); unset, the first of the usual names present (`ID_NAMES`, `TITLE_NAMES`, `TEXT_NAMES`).
A folder is read file by file in sorted order (a `datasets` folder inside it as one source), so passage ids
are stable across runs.
"""

from __future__ import annotations

import bz2
import csv
import gzip
import html
import io
import json
import lzma
import os
import re
import sys
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from odqa.core.errors import DataFormatError, os_error_line
from odqa.core.types import Document, Passage
from odqa.corpus.chunking import chunk_document

_COMPRESSED: dict[str, Callable[..., Any]] = {".gz": gzip.open, ".xz": lzma.open, ".bz2": bz2.open}
_DOC_OPEN = re.compile(r"<doc\s+([^>]*)>")
_ATTR = re.compile(r'(\w+)="([^"]*)"')
_PARQUET_SUFFIXES = (".parquet", ".pq")
_ARROW_SUFFIXES = (".arrow", ".feather", ".ipc")
_DPR_HEADER = ["id", "text", "title"]
_BATCH_ROWS = 1000  # rows per record batch read from a table: bounded memory whatever the corpus size

# where no column is named, the first of these a source has (BEIR: _id; Pyserini: contents; Haystack: content)
ID_NAMES = ("id", "_id", "docid", "doc_id")
TITLE_NAMES = ("title",)
TEXT_NAMES = ("text", "contents", "content", "body")
# the source article's address, kept with each passage where a source has it (the Wikipedia subset's JSON Lines,
# WikiExtractor's <doc url=...>): shown as a link on the page, in the shell and in JSON
URL_NAMES = ("url",)
# a BEIR data set's folder: its documents, beside its questions and qrels/ (relevance judgements), which are none
BEIR_CORPUS, BEIR_QUERIES = "corpus.jsonl", "queries.jsonl"


@dataclass(frozen=True)
class CorpusFields:
    """The columns (or JSON keys) holding each document's id, title and text; empty: the usual names."""

    id: str = ""
    title: str = ""
    text: str = ""

    def resolve(self, columns: Iterable[str], where: str) -> tuple[str, str | None, str]:
        """(id column, title column or None, text column) of a source with these columns."""
        columns = list(columns)
        present = set(columns)
        chosen = []
        for role, named, usual, flag in (
            ("id", self.id, ID_NAMES, "--id-field"),
            ("text", self.text, TEXT_NAMES, "--text-field"),
        ):
            if named:
                if named not in present:
                    raise DataFormatError(
                        f"{where}: no {role} column {named!r} ({flag}); its columns are {', '.join(columns)}"
                    )
                chosen.append(named)
                continue
            found = next((name for name in usual if name in present), None)
            if found is None:
                raise DataFormatError(
                    f"{where}: no {role} column ({' or '.join(usual)}); its columns are "
                    f"{', '.join(columns)}; name the one to use with {flag} (config [corpus] "
                    f"{role}_field)"
                )
            chosen.append(found)
        if self.title and self.title not in present:
            raise DataFormatError(
                f"{where}: no title column {self.title!r} (--title-field); its columns are {', '.join(columns)}"
            )
        title = self.title or next((name for name in TITLE_NAMES if name in present), None)
        return chosen[0], title, chosen[1]


DEFAULT_FIELDS = CorpusFields()


def open_text(path: Path) -> IO[str]:
    """A corpus file as text: UTF-8, a byte-order mark at its start (Windows editors write one) skipped."""
    opener = _COMPRESSED.get(path.suffix)
    if opener is not None:
        return io.TextIOWrapper(opener(path, "rb"), encoding="utf-8-sig")
    return path.open(encoding="utf-8-sig")


def detect_format(path: Path, fields: CorpusFields = DEFAULT_FIELDS) -> str:
    """Name the format of one corpus source (a file, or a `datasets` folder) from its name and first bytes."""
    if path.is_dir():
        return "datasets"
    name = path.name.lower()
    for suffix in _COMPRESSED:
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    if name.endswith(_PARQUET_SUFFIXES):
        return "parquet"
    if name.endswith(_ARROW_SUFFIXES):
        return "arrow"
    try:
        with open_text(path) as f:
            head = f.read(4096)
    except (OSError, EOFError, lzma.LZMAError, UnicodeDecodeError) as exc:
        raise DataFormatError(f"cannot read corpus file {path}: {exc}") from exc
    stripped = head.lstrip()
    if not stripped:
        raise DataFormatError(f"corpus file {path} is empty; pass a file with documents")
    if stripped.startswith("<doc"):
        return "wikiextractor"
    if name.endswith(".tsv"):
        return _tsv_kind(head, fields)
    if name.endswith(".csv"):
        return "csv"
    if stripped.startswith("{") and name.endswith(".json") and '"data"' in head:
        return "squad"
    if stripped.startswith("{"):
        return "jsonl"
    raise DataFormatError(
        f"{path}: unknown corpus format; expected JSON Lines {{id,title,text}}, WikiExtractor <doc> files, "
        "DPR passage TSV (id, text, title), SQuAD JSON, CSV/TSV with "
        "a header, Parquet, Arrow or a datasets save_to_disk folder"
    )


def _tsv_kind(head: str, fields: CorpusFields) -> str:
    """DPR's passage TSV (its header `id text title`, or no header) or a table whose header names the text column."""
    header = next(csv.reader(io.StringIO(head.split("\n", 1)[0]), delimiter="\t"), [])
    if header == _DPR_HEADER:
        return "dpr-tsv"
    if (fields.text and fields.text in header) or any(name in header for name in TEXT_NAMES):
        return "tsv"
    return "dpr-tsv"


def is_dataset_folder(path: Path) -> bool:
    """A folder written by `datasets`' save_to_disk (a Dataset or a DatasetDict)."""
    return (path / "dataset_dict.json").is_file() or (
        (path / "state.json").is_file() and (path / "dataset_info.json").is_file()
    )


def corpus_files(path: str | Path) -> list[Path]:
    path = Path(path)
    try:
        os.stat(path)
    except FileNotFoundError:
        raise DataFormatError(f"corpus not found: {path} (pass a corpus file or folder with --corpus)") from None
    except OSError as exc:  # a link loop, a name too long, no permission: the cause, not "not found"
        raise DataFormatError(f"corpus {os_error_line(exc) or path}") from None
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise DataFormatError(
            f"corpus {path} is not a regular file or folder (a pipe, socket or device); write the "
            "corpus to a file first and pass that"
        )
    files = sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith("."))
    if not files:
        raise DataFormatError(f"corpus folder {path} has no files")
    return _beir_documents(path, files)


def _uncompressed_name(path: Path) -> str:
    """The file's name in lower case, without a compression suffix (`queries.jsonl.gz`: `queries.jsonl`)."""
    name = path.name.lower()
    return next((name[: -len(suffix)] for suffix in _COMPRESSED if name.endswith(suffix)), name)


def _beir_documents(root: Path, files: list[Path]) -> list[Path]:
    """`files` of the folder `root`, each BEIR folder in it (queries.jsonl and qrels/ beside a corpus.jsonl) read
    as what it is: its corpus.jsonl alone, its questions and relevance judgements left out. A queries.jsonl or
    qrels/ file with no corpus.jsonl in the folder is refused, naming the file to pass."""
    beir: dict[Path, Path] = {}  # BEIR folder -> a file of it that is no document
    for file in files:
        if _uncompressed_name(file) == BEIR_QUERIES:
            beir[file.parent] = file  # named before qrels/ in an error
            continue
        qrels = next(
            (
                folder
                for folder in file.parents
                if folder.name == "qrels" and (folder == root or root in folder.parents)
            ),
            None,
        )
        if qrels is not None:
            beir.setdefault(qrels.parent, file)
    if not beir:
        return files
    kept = [f for f in files if not any(folder == f.parent or folder in f.parents for folder in beir)]
    for folder, extra in sorted(beir.items()):
        corpus = sorted(f for f in folder.iterdir() if f.is_file() and _uncompressed_name(f) == BEIR_CORPUS)
        what = "questions" if _uncompressed_name(extra) == BEIR_QUERIES else "relevance judgements"
        if not corpus:
            raise DataFormatError(
                f"corpus folder {root}: {extra} holds BEIR {what}, not documents, and no "
                f"{BEIR_CORPUS} is beside it; pass the corpus file itself with --corpus FILE"
            )
        if not (folder == root or root in folder.parents):  # root is the qrels/ folder of a BEIR folder
            raise DataFormatError(
                f"corpus folder {root} holds BEIR {what}, not documents; pass the corpus file "
                f"itself with --corpus {corpus[0]}"
            )
        kept.append(corpus[0])
    return sorted(kept)


def corpus_sources(path: str | Path) -> list[Path]:
    """The sources of a corpus in reading order: its files, each `datasets` folder in it counted once."""
    root = Path(path)
    sources: list[Path] = []
    for file in corpus_files(root):
        # the outermost dataset folder holding the file (a DatasetDict's, not its split's), within the root
        source = file
        for folder in [root, *reversed([p for p in file.parents if root in p.parents])]:
            if folder.is_dir() and is_dataset_folder(folder):
                source = folder
                break
        if not sources or sources[-1] != source:
            sources.append(source)
    return sources


def iter_documents(path: str | Path, fields: CorpusFields = DEFAULT_FIELDS) -> Iterator[Document]:
    """Every document of a corpus file or folder (DPR TSV rows count as documents too)."""
    for source in corpus_sources(path):
        fmt = detect_format(source, fields)
        located = _LOCATED[fmt](source, fields)
        yield from (doc for _, doc in _readable(located, source))


def iter_passages(path: str | Path, words: int = 100, fields: CorpusFields = DEFAULT_FIELDS) -> Iterator[Passage]:
    """Passages of a corpus: DPR TSV rows as they are, other documents chunked to about `words` words."""
    seen: dict[str, tuple[int, int]] = {}  # document id -> (source number, line) where it first appeared
    files = corpus_sources(path)
    for number, file in enumerate(files):
        fmt = detect_format(file, fields)
        located = _LOCATED[fmt](file, fields)
        for line, doc in _readable(located, file):
            where = f"{file}:{line}" if line else f"{file} ({doc.title or 'document'})"
            if not doc.id.strip():
                raise DataFormatError(f"{where}: the document has an empty id; give every document a unique id")
            if doc.id in seen:
                first_file, first_line = seen[doc.id]
                first = f"{files[first_file]}:{first_line}" if first_line else str(files[first_file])
                raise DataFormatError(
                    f"{where}: document id {doc.id!r} was already used at {first}; give every document a unique id"
                )
            seen[doc.id] = (number, line)
            if fmt == "dpr-tsv":
                yield Passage(
                    id=doc.id, title=doc.title, text=doc.text, doc_id=doc.id, start=0, end=len(doc.text), url=doc.url
                )
            else:
                yield from chunk_document(doc, words=words)


def _readable(located: Iterator[tuple[int, Document]], file: Path) -> Iterator[tuple[int, Document]]:
    """Undecodable bytes or a cut-short compressed file met mid-way become one error naming where."""
    line = 0
    try:
        for line, doc in located:
            yield line, doc
    except UnicodeDecodeError as exc:
        raise DataFormatError(
            f"{file}: not UTF-8 text after line {line} ({exc.reason} at byte {exc.start} of a "
            "block); re-encode the file as UTF-8"
        ) from exc
    except (EOFError, lzma.LZMAError, zlib.error, OSError) as exc:
        raise DataFormatError(
            f"{file}: cannot be read to its end after line {line} ({exc.__class__.__name__}: "
            f"{exc}); the file is damaged or cut short, download or compress it again"
        ) from exc


def _jsonl_located(path: Path, fields: CorpusFields) -> Iterator[tuple[int, Document]]:
    with open_text(path) as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                if not isinstance(row, dict):
                    raise TypeError(f"a JSON {type(row).__name__}")
                id_key, title_key, text_key = fields.resolve(row, f"{path}:{lineno}")
            except (json.JSONDecodeError, TypeError, AttributeError) as exc:
                raise DataFormatError(
                    f"{path}:{lineno}: expected a JSON object with 'id', 'title' and 'text' (or 'contents'); "
                    f"fix or remove this line ({exc.__class__.__name__})"
                ) from exc
            except RecursionError:
                raise DataFormatError(
                    f"{path}:{lineno}: JSON nested too deeply to read; fix or remove this line"
                ) from None
            where = f"{path}:{lineno}"
            yield (
                lineno,
                _document(row[id_key], row.get(title_key) if title_key else "", row[text_key], where, _url(row)),
            )


def _url(row) -> str:
    """The first of `URL_NAMES` a row (a JSON object, a table row as a dict) gives as text, else ""."""
    return next((value for name in URL_NAMES if isinstance(value := row.get(name), str) and value.strip()), "")


def _document(doc_id, title, text, where: str, url: str = "") -> Document:
    if doc_id is None or text is None:
        raise DataFormatError(f"{where}: the document has no {'id' if doc_id is None else 'text'}; fix or remove it")
    if not isinstance(text, str):
        raise DataFormatError(f"{where}: 'text' must be a string, got {type(text).__name__}; fix or remove it")
    document = Document(str(doc_id), "" if title is None else str(title), text, url.strip())
    for name in ("id", "title", "text", "url"):
        try:
            getattr(document, name).encode("utf-8")
        except UnicodeEncodeError as exc:  # a JSON escape such as "\ud800" gives half of a UTF-16 pair
            raise DataFormatError(
                f"{where}: the document's {name} holds a lone surrogate ({exc.object[exc.start]!r}, "
                "half of a UTF-16 pair), which is no text; fix or remove it"
            ) from None
    return document


def _batches_located(
    batches: Iterable, fields: CorpusFields, where: str, first_line: int = 1
) -> Iterator[tuple[int, Document]]:
    """Documents of a table read as pyarrow record batches (or tables); lines count rows from `first_line`."""
    line = first_line
    columns = None
    for batch in batches:
        if columns is None:
            columns = fields.resolve(batch.schema.names, where)
        id_col, title_col, text_col = columns
        ids = batch.column(id_col).to_pylist()
        texts = batch.column(text_col).to_pylist()
        titles = batch.column(title_col).to_pylist() if title_col else [""] * len(ids)
        url_col = _url_column(batch.schema.names)
        urls = batch.column(url_col).to_pylist() if url_col else [""] * len(ids)
        for doc_id, title, text, url in zip(ids, titles, texts, urls):
            yield line, _document(doc_id, title, text, f"{where}:{line}", url if isinstance(url, str) else "")
            line += 1


def _url_column(columns) -> str | None:
    """The column of a table holding its documents' source addresses (`URL_NAMES`), if it has one."""
    return next((name for name in URL_NAMES if name in columns), None)


def _table_error(path: Path, exc: Exception) -> DataFormatError:
    return DataFormatError(
        f"{path}: cannot be read as a table ({exc.__class__.__name__}: {str(exc)[:200]}); "
        "check that it is a complete file of its kind"
    )


def _parquet_located(path: Path, fields: CorpusFields) -> Iterator[tuple[int, Document]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.ParquetFile(path)
        id_col, title_col, text_col = fields.resolve(table.schema_arrow.names, str(path))
        wanted = [c for c in (id_col, title_col, text_col, _url_column(table.schema_arrow.names)) if c]
        yield from _batches_located(table.iter_batches(batch_size=_BATCH_ROWS, columns=wanted), fields, str(path))
    except (pa.ArrowException, OSError) as exc:
        raise _table_error(path, exc) from exc


def _arrow_located(path: Path, fields: CorpusFields) -> Iterator[tuple[int, Document]]:
    import pyarrow as pa

    try:
        source = pa.memory_map(str(path))
        try:
            reader = pa.ipc.open_file(source)
            batches = (reader.get_batch(i) for i in range(reader.num_record_batches))
        except pa.ArrowInvalid:  # not the IPC file format: the stream format `datasets` writes
            source.seek(0)
            batches = pa.ipc.open_stream(source)
        yield from _batches_located(batches, fields, str(path))
    except (pa.ArrowException, OSError) as exc:
        raise _table_error(path, exc) from exc


def _delimited_located(path: Path, fields: CorpusFields, delimiter: str) -> Iterator[tuple[int, Document]]:
    import pyarrow as pa
    import pyarrow.csv as pacsv

    with open_text(path) as f:
        header = next(csv.reader(f, delimiter=delimiter), [])
    id_col, title_col, text_col = fields.resolve(header, str(path))
    wanted = [c for c in (id_col, title_col, text_col, _url_column(header)) if c]
    opener = _COMPRESSED.get(path.suffix)
    try:
        with opener(path, "rb") if opener else path.open("rb") as raw:
            reader = pacsv.open_csv(
                raw,
                read_options=pacsv.ReadOptions(block_size=1 << 22),
                parse_options=pacsv.ParseOptions(delimiter=delimiter, newlines_in_values=True),
                convert_options=pacsv.ConvertOptions(
                    include_columns=wanted, column_types={c: pa.string() for c in wanted}, strings_can_be_null=False
                ),
            )
            yield from _batches_located(reader, fields, str(path), first_line=2)
    except (pa.ArrowException, OSError) as exc:
        raise _table_error(path, exc) from exc


def _csv_located(path: Path, fields: CorpusFields) -> Iterator[tuple[int, Document]]:
    return _delimited_located(path, fields, ",")


def _tsv_located(path: Path, fields: CorpusFields) -> Iterator[tuple[int, Document]]:
    return _delimited_located(path, fields, "\t")


def _datasets_located(path: Path, fields: CorpusFields) -> Iterator[tuple[int, Document]]:
    import datasets

    try:
        loaded = datasets.load_from_disk(str(path))
    except (OSError, ValueError, FileNotFoundError) as exc:
        raise DataFormatError(f"{path}: cannot be loaded with datasets.load_from_disk ({exc})") from exc
    if isinstance(loaded, datasets.DatasetDict):
        splits = list(loaded)
        split = splits[0] if len(splits) == 1 else "corpus" if "corpus" in splits else None
        if split is None:
            raise DataFormatError(
                f"{path}: a DatasetDict of splits {', '.join(splits)}; pass one split's folder, "
                f"e.g. --corpus {path / splits[0]}"
            )
        loaded = loaded[split]
    yield from _batches_located(loaded.with_format("arrow").iter(batch_size=_BATCH_ROWS), fields, str(path))


def _wikiextractor_located(path: Path, fields: CorpusFields) -> Iterator[tuple[int, Document]]:
    with open_text(path) as f:
        attrs: dict[str, str] | None = None
        lines: list[str] = []
        start = 0
        for lineno, line in enumerate(f, 1):
            if attrs is None:
                match = _DOC_OPEN.match(line.strip())
                if match:
                    attrs = dict(_ATTR.findall(match.group(1)))
                    start = lineno
                    lines = []
                continue
            if line.strip() == "</doc>":
                title = html.unescape(attrs.get("title", ""))
                # WikiExtractor repeats the title as the first line of the body
                if lines and lines[0].strip() == title:
                    lines = lines[1:]
                text = "\n".join(line.strip() for line in lines if line.strip())
                yield (
                    start,
                    Document(attrs.get("id", ""), title, html.unescape(text), html.unescape(attrs.get("url", ""))),
                )
                attrs = None
            else:
                lines.append(line.rstrip("\n"))
        if attrs is not None:
            raise DataFormatError(
                f"{path}: document {attrs.get('id', '?')} has no closing </doc>; the file is cut short"
            )


def _dpr_rows(path: Path) -> Iterator[tuple[int, list[str]]]:
    csv.field_size_limit(sys.maxsize)
    with open_text(path) as f:
        for lineno, row in enumerate(csv.reader(f, delimiter="\t"), 1):
            if lineno == 1 and row[:1] == ["id"]:
                continue
            if len(row) < 3:
                raise DataFormatError(
                    f"{path}:{lineno}: DPR passage TSV needs 3 columns (id, text, title), got {len(row)}"
                )
            yield lineno, row


def _dpr_located(path: Path, fields: CorpusFields) -> Iterator[tuple[int, Document]]:
    for lineno, row in _dpr_rows(path):
        yield lineno, Document(row[0], row[2], row[1])


def _squad_located(path: Path, fields: CorpusFields) -> Iterator[tuple[int, Document]]:
    try:
        with open_text(path) as f:
            data = json.load(f)["data"]
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise DataFormatError(f"{path}: not a SQuAD JSON file with a 'data' list ({exc})") from exc
    except RecursionError:
        raise DataFormatError(f"{path}: JSON nested too deeply to read; is it a SQuAD file?") from None
    seen_titles: set[str] = set()
    try:
        for number, article in enumerate(data):
            raw_title = article.get("title", "")
            title = raw_title.replace("_", " ")
            # `title#i` as always; an article whose title is empty or repeats (CMRC 2018 dev has two untitled
            # ones) is told apart by its article id where it has one (CMRC, DRCD), else its position
            key = (
                raw_title
                if raw_title and raw_title not in seen_titles
                else f"{raw_title}@{article.get('id') or number}"
            )
            seen_titles.add(raw_title)
            for i, paragraph in enumerate(article.get("paragraphs", [])):
                if not isinstance(paragraph["context"], str):
                    raise TypeError("'context' is not a string")
                yield 0, Document(f"{key}#{i}", title, paragraph["context"])
    except (KeyError, TypeError, AttributeError) as exc:
        raise DataFormatError(
            f"{path}: not SQuAD JSON (articles with 'title' and 'paragraphs' of 'context' "
            f"strings): {exc.__class__.__name__} {exc}"
        ) from exc


_LOCATED = {
    "jsonl": _jsonl_located,
    "wikiextractor": _wikiextractor_located,
    "dpr-tsv": _dpr_located,
    "squad": _squad_located,
    "parquet": _parquet_located,
    "arrow": _arrow_located,
    "csv": _csv_located,
    "tsv": _tsv_located,
    "datasets": _datasets_located,
}
