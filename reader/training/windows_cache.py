"""Training windows kept beside a run, so that resuming it skips reading and tokenising its training files.

A long run resumed across sessions otherwise spends minutes at every start turning the same files into the same
windows. The windows are written once, under `output_dir/windows-KEY/`, where KEY digests everything that shapes
them: each training file's path, size and modification time, the settings that select and cut examples, the
tokenizer's vocabulary and the source of the code that builds them. A changed file, setting or tokenizer gives a
new key (the old folder is removed); a cache whose bytes do not match its recorded digest is named in a warning
and rebuilt, never read.
"""

from __future__ import annotations

import inspect
import json
import logging
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from odqa.core.atomic import atomic_folder, remove_tree
from odqa.core.training import file_digest

log = logging.getLogger("odqa.reader.training.windows_cache")

PREFIX = "windows-"
ARRAYS = "windows.npz"
META = "windows.json"
# TrainConfig fields that change which examples are read or how they are cut into windows
SHAPING_FIELDS = (
    "limit",
    "negative_ratio",
    "seed",
    "all_answers",
    "to_simplified",
    "entity_marks",
    "max_length",
    "stride",
    "max_query_tokens",
)


@dataclass
class CachedWindows:
    feats: dict[str, list]
    stats: dict[str, Any]
    languages: list[str]


def windows_key(cfg, tokenizer, code_modules: list[Any]) -> str:
    """The digest naming the windows `cfg`'s training files give with `tokenizer` and the code in `code_modules`."""
    import xxhash

    files = []
    for name in cfg.train_files:
        path = Path(name).resolve()
        stat = path.stat()
        files.append([str(path), stat.st_size, stat.st_mtime_ns])
    settings = {f: getattr(cfg, f) for f in SHAPING_FIELDS}
    settings["shared_norm"] = bool(cfg.shared_norm)  # loading keeps every negative when windows share a softmax
    digest = xxhash.xxh3_128()
    digest.update(json.dumps({"files": files, "settings": settings}, sort_keys=True).encode())
    vocabulary = json.loads(tokenizer.backend_tokenizer.to_str())
    for call_state in ("truncation", "padding"):  # set by its last call and saved with it: not its vocabulary
        vocabulary.pop(call_state, None)
    digest.update(json.dumps(vocabulary, sort_keys=True).encode())
    for module in code_modules:
        digest.update(inspect.getsource(module).encode())
    return digest.hexdigest()[:20]


def load_windows(output_dir: Path, key: str) -> CachedWindows | None:
    """The windows cached under `key`, or None when there are none or they are damaged (named in a warning)."""
    folder = output_dir / f"{PREFIX}{key}"
    if not (folder / META).is_file():
        return None
    try:
        meta = json.loads((folder / META).read_text())
        arrays_path = folder / ARRAYS
        if arrays_path.stat().st_size != meta["bytes"] or file_digest(arrays_path) != meta["digest"]:
            raise ValueError(f"{ARRAYS} does not match its recorded digest")
        with np.load(arrays_path) as arrays:
            ids, types, offsets = arrays["input_ids"], arrays["token_type_ids"], arrays["offsets"]
            bounds = offsets.tolist()
            feats: dict[str, list] = {
                "input_ids": [ids[a:b].tolist() for a, b in zip(bounds, bounds[1:])],
                "token_type_ids": [types[a:b].tolist() for a, b in zip(bounds, bounds[1:])],
                "start": arrays["start"].tolist(),
                "end": arrays["end"].tolist(),
            }
        feats["group"] = meta["groups"]
        if not len(feats["input_ids"]) == len(feats["start"]) == len(feats["group"]):
            raise ValueError("its parts hold different numbers of windows")
    except (OSError, ValueError, KeyError, json.JSONDecodeError) as exc:
        log.warning("cached windows %s are damaged (%s); rebuilding them from the training files", folder, exc)
        return None
    return CachedWindows(feats, meta["stats"], meta["languages"])


def save_windows(output_dir: Path, key: str, feats: dict[str, list], stats: Any, languages: set[str]) -> None:
    """Write the windows under `key` (atomically) and remove the windows of earlier keys."""
    folder = output_dir / f"{PREFIX}{key}"
    lengths = np.fromiter((len(row) for row in feats["input_ids"]), dtype=np.int64, count=len(feats["input_ids"]))
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    with atomic_folder(folder) as tmp:
        np.savez(
            tmp / ARRAYS,
            input_ids=np.fromiter((t for row in feats["input_ids"] for t in row), dtype=np.int32, count=offsets[-1]),
            token_type_ids=np.fromiter(
                (t for row in feats["token_type_ids"] for t in row), dtype=np.int8, count=offsets[-1]
            ),
            offsets=offsets,
            start=np.asarray(feats["start"], dtype=np.int32),
            end=np.asarray(feats["end"], dtype=np.int32),
        )
        meta = {
            "bytes": (tmp / ARRAYS).stat().st_size,
            "digest": file_digest(tmp / ARRAYS),
            "stats": asdict(stats),
            "languages": sorted(languages),
            "groups": feats["group"],
        }
        (tmp / META).write_text(json.dumps(meta))
    for old in output_dir.glob(f"{PREFIX}*"):
        if old.is_dir() and old.name != folder.name:
            remove_tree(old)
