"""The JSON files a model folder carries (reader_config.json, calibration.json, linker_config.json,
retriever_info.json, a sentence-transformers module's config, config.json) are settings like any other: each
value they give a setting goes through that setting's rule (odqa.core.settings: type, range, finite), and a file
that cannot be read as one JSON object is one line naming it. Each kind of file has its own loader beside the
settings it holds (reader.settings.load_reader_config, Calibration.load, linker.heads.load_linker_config,
odqa.core.text_encoding.retriever_info), all built on `read_model_json` and `checked_values`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from odqa.core import strict_json
from odqa.core.errors import OdqaError, os_error_line
from odqa.core.settings import value_refusal

FIX = "restore the model folder's file (reinstall or export the model again) or correct it"


def read_model_json(path: str | Path, fix: str = FIX, expect: type = dict) -> Any:
    """The JSON object (`expect=list`: the array) of a model folder's file, in one line naming the file where it
    is unreadable, not UTF-8, no JSON (a truncated file), names a key twice, or holds something else."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise OdqaError(f"{path} is not UTF-8 text (byte {exc.start}); {fix}") from None
    except OSError as exc:
        raise OdqaError(os_error_line(exc) or f"cannot read {path}: {exc.strerror}") from None
    try:
        data = strict_json.loads(text)
    except strict_json.DuplicateKeyError as exc:
        raise OdqaError(f"{path}: {exc} (which one holds?); {fix}") from None
    except json.JSONDecodeError as exc:
        problem = "it ends early (truncated?)" if exc.pos >= len(text.rstrip()) else exc.msg
        raise OdqaError(
            f"{path} is not valid JSON ({problem} at line {exc.lineno}, column {exc.colno}); {fix}"
        ) from None
    except (ValueError, RecursionError) as exc:  # a number too long to read, nesting too deep
        raise OdqaError(f"{path} is not valid JSON ({str(exc).splitlines()[0][:120]}); {fix}") from None
    if not isinstance(data, expect):
        kind = "an array" if expect is list else "a JSON object"
        raise OdqaError(f"{path} must hold {kind}, not a {type(data).__name__}; {fix}")
    return data


def checked_values(path: str | Path, data: dict[str, Any], owner: type, fix: str = FIX) -> dict[str, Any]:
    """The values of `data` that set `owner`'s fields (a settings dataclass; other keys are the file's notes),
    each checked by its field's rule: refused in one line naming the file, the key, the value and what to give."""
    names = set(getattr(owner, "__dataclass_fields__", {}))
    kept = {}
    for key, value in data.items():
        if key not in names:
            continue
        refused = value_refusal(owner, key, value)
        if refused:
            why, give = refused
            raise OdqaError(f"{path}: {key} = {_shown(value)} {why}; give {give} ({fix})")
        kept[key] = value
    return kept


def load_model_settings(path: str | Path, owner: type, fix: str = FIX) -> dict[str, Any]:
    """`read_model_json` then `checked_values`: the file's values for `owner`'s fields, each within its rule."""
    return checked_values(path, read_model_json(path, fix), owner, fix)


def _shown(value: Any) -> str:
    """The value as the file writes it (NaN, 1e+308, "20", true), cut to a line's share."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
