"""JSON as the standard defines it: what odqa writes (--json results, predict's lines, per-question files, run
files, manifests) never holds NaN or an infinity, which Python's json writes as the bare words NaN and Infinity
that no strict reader parses. `dumps` is json.dumps with allow_nan=False, and a non-finite number is one line
naming where it is, instead of a ValueError traceback or a file nobody can read."""

from __future__ import annotations

import json
import math
from typing import Any

from odqa.core.errors import OdqaError


def dumps(obj: Any, **kwargs: Any) -> str:
    """`json.dumps(obj, allow_nan=False, **kwargs)`; OdqaError naming the first non-finite number's place."""
    try:
        return json.dumps(obj, allow_nan=False, **kwargs)
    except ValueError:
        found = non_finite(obj)
        if found is None:
            raise
        where, value = found
        raise OdqaError(
            f"cannot write {where or 'the value'} = {value} as JSON (NaN and infinities are not JSON): "
            "a setting out of its range or a broken model "
            "gave it; check the config's numbers, or report it"
        ) from None


def non_finite(obj: Any, where: str = "") -> tuple[str, float] | None:
    """(its place, as answers[0].score, and the value) of the first NaN or infinity in `obj`, else None."""
    if isinstance(obj, float):
        return None if math.isfinite(obj) else (where, obj)
    if isinstance(obj, dict):
        items = ((f"{where}.{key}" if where else str(key), value) for key, value in obj.items())
    elif isinstance(obj, (list, tuple)):
        items = ((f"{where}[{i}]", value) for i, value in enumerate(obj))
    else:
        return None
    for place, value in items:
        found = non_finite(value, place)
        if found:
            return found
    return None


class DuplicateKeyError(ValueError):
    """A JSON object that names a key twice (json keeps the last without a word)."""

    def __init__(self, key: str):
        super().__init__(f"the key {key!r} is given twice")
        self.key = key


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise DuplicateKeyError(key)
        seen[key] = value
    return seen


def loads(text: str | bytes) -> Any:
    """`json.loads` that refuses an object naming a key twice (DuplicateKeyError, a ValueError): a config or a
    model folder's file whose second `"k":` silently overrides the first says so instead."""
    return json.loads(text, object_pairs_hook=_unique_pairs)
