"""Read corpora in the formats users download.

* JSON Lines (plain, .gz, .xz, .bz2): `{id, title, text}` (Wikipedia dumps converted by WikiExtractor --json,
  our shared subset) or Pyserini's `{id, contents}`.
* WikiExtractor output folders: files of `<doc id=".." url=".." title="..">` blocks (plain or .bz2).
* DPR passage TSV (`id<TAB>text<TAB>title`, with header): already passages, kept as they are.
* SQuAD JSON: each paragraph is a document.
A folder is read file by file in sorted order, so passage ids are stable across runs.
"""

from __future__ import annotations

import bz2
import csv
import gzip
import html
import io
import json
import lzma
import re
import sys
from pathlib import Path
from typing import IO, Iterator

from odqa.core.errors import DataFormatError
from odqa.core.types import Document, Passage
from odqa.corpus.chunking import chunk_document

_COMPRESSED = {".gz": gzip.open, ".xz": lzma.open, ".bz2": bz2.open}
_DOC_OPEN = re.compile(r'<doc\s+([^>]*)>')
_ATTR = re.compile(r'(\w+)="([^"]*)"')


def open_text(path: Path) -> IO[str]:
    opener = _COMPRESSED.get(path.suffix)
    if opener is not None:
        return io.TextIOWrapper(opener(path, "rb"), encoding="utf-8")
    return path.open(encoding="utf-8")


def detect_format(path: Path) -> str:
    """Name the format of one corpus file from its name and first bytes."""
    name = path.name
    for suffix in _COMPRESSED:
        if name.endswith(suffix):
            name = name[: -len(suffix)]
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
        return "dpr-tsv"
    if stripped.startswith("{") and name.endswith(".json") and '"data"' in head:
        return "squad"
    if stripped.startswith("{"):
        return "jsonl"
    raise DataFormatError(
        f"{path}: unknown corpus format; expected JSON Lines {{id,title,text}}, WikiExtractor <doc> files, "
        "DPR passage TSV (id, text, title) or SQuAD JSON"
    )


def corpus_files(path: str | Path) -> list[Path]:
    path = Path(path)
    if not path.exists():
        raise DataFormatError(f"corpus not found: {path} (pass a corpus file or folder with --corpus)")
    if path.is_file():
        return [path]
    files = sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith("."))
    if not files:
        raise DataFormatError(f"corpus folder {path} has no files")
    return files


def iter_documents(path: str | Path) -> Iterator[Document]:
    """Every document of a corpus file or folder (DPR TSV rows count as documents too)."""
    for file in corpus_files(path):
        fmt = detect_format(file)
        yield from _READERS[fmt](file)


def iter_passages(path: str | Path, words: int = 100) -> Iterator[Passage]:
    """Passages of a corpus: DPR TSV rows as they are, other documents chunked to about `words` words."""
    for file in corpus_files(path):
        fmt = detect_format(file)
        if fmt == "dpr-tsv":
            yield from _dpr_passages(file)
        else:
            for doc in _READERS[fmt](file):
                yield from chunk_document(doc, words=words)


def _jsonl(path: Path) -> Iterator[Document]:
    with open_text(path) as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                doc_id = str(row.get("id", row.get("_id")))
                text = row.get("text", row.get("contents"))
                if text is None or doc_id == "None":
                    raise KeyError("id/text")
            except (json.JSONDecodeError, KeyError, AttributeError) as exc:
                raise DataFormatError(
                    f"{path}:{lineno}: expected a JSON object with 'id', 'title' and 'text' (or 'contents'); "
                    f"fix or remove this line ({exc.__class__.__name__})"
                ) from exc
            yield Document(doc_id, str(row.get("title", "")), text)


def _wikiextractor(path: Path) -> Iterator[Document]:
    with open_text(path) as f:
        attrs: dict[str, str] | None = None
        lines: list[str] = []
        for line in f:
            if attrs is None:
                match = _DOC_OPEN.match(line.strip())
                if match:
                    attrs = dict(_ATTR.findall(match.group(1)))
                    lines = []
                continue
            if line.strip() == "</doc>":
                title = html.unescape(attrs.get("title", ""))
                # WikiExtractor repeats the title as the first line of the body
                if lines and lines[0].strip() == title:
                    lines = lines[1:]
                text = "\n".join(l.strip() for l in lines if l.strip())
                yield Document(attrs.get("id", ""), title, html.unescape(text))
                attrs = None
            else:
                lines.append(line.rstrip("\n"))
        if attrs is not None:
            raise DataFormatError(f"{path}: document {attrs.get('id', '?')} has no closing </doc>; the file is cut short")


def _dpr_rows(path: Path) -> Iterator[tuple[int, list[str]]]:
    csv.field_size_limit(sys.maxsize)
    with open_text(path) as f:
        for lineno, row in enumerate(csv.reader(f, delimiter="\t"), 1):
            if lineno == 1 and row[:1] == ["id"]:
                continue
            if len(row) < 3:
                raise DataFormatError(f"{path}:{lineno}: DPR passage TSV needs 3 columns (id, text, title), got {len(row)}")
            yield lineno, row


def _dpr_documents(path: Path) -> Iterator[Document]:
    for _, row in _dpr_rows(path):
        yield Document(row[0], row[2], row[1])


def _dpr_passages(path: Path) -> Iterator[Passage]:
    for _, row in _dpr_rows(path):
        yield Passage(id=row[0], title=row[2], text=row[1], doc_id=row[0], start=0, end=len(row[1]))


def _squad(path: Path) -> Iterator[Document]:
    try:
        with open_text(path) as f:
            data = json.load(f)["data"]
    except (json.JSONDecodeError, KeyError) as exc:
        raise DataFormatError(f"{path}: not a SQuAD JSON file with a 'data' list ({exc})") from exc
    for article in data:
        title = article.get("title", "").replace("_", " ")
        for i, paragraph in enumerate(article.get("paragraphs", [])):
            yield Document(f"{article.get('title', '')}#{i}", title, paragraph["context"])


_READERS = {"jsonl": _jsonl, "wikiextractor": _wikiextractor, "dpr-tsv": _dpr_documents, "squad": _squad}
