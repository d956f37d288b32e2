"""Which runtime and precision run a model's inference, and the ONNX Runtime path for CPUs without native bf16.

`precision` (auto | fp32 | bf16 | fp16 | int8) and `runtime` (auto | torch | onnx) are resolved once per model into
an `InferencePlan`, by a rule of the model and the CPU's flags alone: nothing is timed, so every process on a
machine (`odqa ask`, the shell, the server, a Python program) runs a model the same way and gives a question the
same answer and probability, busy or idle. `auto` on a CPU, with onnxruntime installed:

1. A model whose int8 cost is measured within `auto`'s promise (at most 1 F1 lost for a reader, recall kept for
   an encoder; its folder says so: `"auto_int8": true` in a reader's reader_config.json or an encoder's
   retriever_info.json, the card gives the figures) runs ONNX Runtime int8 (dynamic, one weight scale per output
   channel) on every CPU without native bf16, and on those with it that have native int8 dot products too (VNNI or
   AMX's int8 tiles: every AVX512-BF16 and AMX CPU made so far). int8 was the faster path on every CPU measured, idle
   and busy: AVX512-BF16 with VNNI (EPYC) and AVX2 (EPYC) (bench/auto_path.py; bench/results/speed-avx512-bf16.md,
   bench/results/auto-path.md); a bf16 CPU running int8 on AVX2's kernels instead was slower, so the flags ask for
   both. An encoder marked `"auto_int8_passages": true` gets it for an index build's passages alone.
2. The others: torch bf16 on CPUs with native bf16 (AMX, AVX512-BF16) for bulk work (a reader's passages, an index
   build's, a knowledge base's entities); ONNX Runtime fp32 for models reading questions there (`question_time`:
   the linker, a search's question encoder; a cached graph answers without importing torch, most of a fresh
   `odqa ask`'s start) and for every model on CPUs without native bf16 (the same arithmetic as torch fp32:
   bench/results/speed-avx2.md).

Without onnxruntime, `auto` runs torch: bf16 where the CPU has native bf16, else fp32. CUDA keeps torch (fp16
under `auto`). Training never goes through here.

ONNX graphs are exported from the live torch module, optimised (fused attention, layer norms, GELU) and, for
int8, quantised; they are cached under `$ODQA_HOME/onnx/` keyed by a digest of the module's weights, so a
retrained model under the same name gets a fresh graph. A model loaded from a local folder names its weights by
the digest of its weight files (odqa.core.models.model_fingerprint, kept across processes), so `cached_graph`
finds its graph before any torch module exists: the components then run the session alone and build the torch
module only if something asks for it. Each cache entry is written to a temporary folder and renamed into
place, so a crashed or concurrent build never leaves a half-written graph.
"""

from __future__ import annotations

import copy
import hashlib
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from odqa.core.errors import OdqaError
from odqa.core.logs import get_logger, root_logging_kept
from odqa.core.paths import odqa_home

log = get_logger(__name__)

PRECISIONS = ("auto", "fp32", "bf16", "fp16", "int8")
RUNTIMES = ("auto", "torch", "onnx")
# part of every cache key: bump when the export, optimisation or quantisation recipe changes
GRAPH_RECIPE = "1"
TOKEN_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


@dataclass(frozen=True)
class InferenceSettings:
    """How the models that answer questions run (the reader, the encoders, the linker), before `plan_inference`
    makes it concrete for one model and device: the one place these defaults are written. OdqaConfig's
    `precision` and `runtime`, the reader's settings and the models' loaders take theirs from `INFERENCE`."""

    precision: str = "auto"  # one of PRECISIONS
    runtime: str = "auto"  # one of RUNTIMES


INFERENCE = InferenceSettings()  # the defaults, for a signature that takes one of the settings apart


@dataclass(frozen=True)
class InferencePlan:
    runtime: str  # torch | onnx
    precision: str  # fp32 | bf16 | fp16 | int8
    reason: str = ""

    @property
    def label(self) -> str:
        return f"{self.runtime} {self.precision}"

    def to_dict(self) -> dict:
        return {"runtime": self.runtime, "precision": self.precision, "reason": self.reason}


def onnx_runtime_available() -> bool:
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        return False
    return True


def plan_inference(
    device_type: str, settings: InferenceSettings, *, auto_int8: bool = False, question_time: bool = False
) -> InferencePlan:
    """`settings`' precision and runtime made concrete for a device type ("cpu", "cuda"), by the module's rule.

    `auto_int8`: the model's int8 cost is measured within `auto`'s promise (a reader's reader_config.json, an
    encoder's retriever_info.json: `"auto_int8": true`), so `auto` runs it in ONNX Runtime int8 on every CPU.
    `question_time`: the model reads questions (the linker, a search's question encoder), a few short texts a
    call: without int8, `auto` runs it on onnx fp32 on CPUs with native bf16 too (no torch import)."""
    from odqa.core.device import cpu_has_fast_bf16, cpu_has_fast_int8

    precision, runtime = settings.precision, settings.runtime
    if precision not in PRECISIONS:
        raise OdqaError(f"unknown precision {precision!r}; use one of {', '.join(PRECISIONS)}")
    if runtime not in RUNTIMES:
        raise OdqaError(f"unknown runtime {runtime!r}; use one of {', '.join(RUNTIMES)}")
    if device_type != "cpu":
        if runtime == "onnx" or precision == "int8":
            raise OdqaError("the onnx runtime and int8 run on CPU only; use --precision auto|fp16|bf16|fp32 on a GPU")
        return InferencePlan("torch", "fp16" if precision == "auto" else precision, "GPU")
    if precision == "fp16":
        raise OdqaError("fp16 needs a GPU; on CPU use auto, fp32, int8, or bf16 where the CPU has AMX/AVX512-BF16")
    if runtime == "onnx" and not onnx_runtime_available():
        raise OdqaError("runtime onnx needs onnxruntime: pip install onnxruntime onnx")
    if runtime == "onnx" and precision == "bf16":
        raise OdqaError("runtime onnx runs fp32 or int8; use --runtime torch for bf16")
    if precision != "auto":
        if runtime == "auto":
            runtime = "onnx" if precision == "int8" and onnx_runtime_available() else "torch"
        return InferencePlan(runtime, precision, "asked for")
    native_bf16 = cpu_has_fast_bf16()
    onnx = runtime != "torch" and onnx_runtime_available()
    # int8 against native bf16 only with native int8 dot products too; against fp32 (no native bf16) always
    if onnx and auto_int8 and (not native_bf16 or cpu_has_fast_int8()):
        return InferencePlan("onnx", "int8", "auto: int8 measured within auto's band for this model")
    if native_bf16 and runtime != "onnx" and not (onnx and question_time):
        return InferencePlan("torch", "bf16", "auto: CPU with native bf16" + _int8_note(auto_int8, runtime))
    if onnx:
        where = "questions, read without importing torch" if native_bf16 else "CPU without native bf16"
        return InferencePlan("onnx", "fp32", f"auto: {where}" + _int8_note(auto_int8, runtime))
    if runtime == "torch":
        return InferencePlan("torch", "fp32", "auto: torch runtime asked for, CPU without native bf16")
    return InferencePlan("torch", "fp32", "auto: CPU without native bf16, onnxruntime not installed")


def _int8_note(auto_int8: bool, runtime: str) -> str:
    """Why a plan of `auto` is not int8, where int8 would otherwise be the path."""
    if not auto_int8:
        return ", int8 not measured within auto's band for this model"
    if runtime == "torch":
        return f", runtime {runtime} asked for"
    return ", onnxruntime not installed" if not onnx_runtime_available() else ", no native int8 (VNNI, AMX) beside it"


_announced: set[tuple[str, str]] = set()


def announce(component: str, plan: InferencePlan) -> None:
    """Log the plan of a component once per process (the command line shows it on stderr, which keeps stdout's
    answers and JSON clean)."""
    if (component, plan.label) in _announced:
        return
    _announced.add((component, plan.label))
    log.info("%s runs %s (%s)", component, plan.label, plan.reason)


def weights_fingerprint(module) -> str:
    """Digest of a torch module's parameters and buffers (names, shapes, dtypes, values)."""
    import torch

    digest = hashlib.sha1(GRAPH_RECIPE.encode())
    for name, tensor in module.state_dict().items():
        t = tensor.detach().cpu().contiguous()
        digest.update(f"{name}:{tuple(t.shape)}:{t.dtype}".encode())
        digest.update(t.view(-1).view(dtype=torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def weights_version(module) -> tuple:
    """Changes whenever a parameter of `module` is replaced or updated in place (an optimiser step), cheaply:
    a session exported from older weights is then rebuilt instead of answering with them."""
    return tuple((id(p), p._version) for p in module.parameters())


def int8_dynamic(module):
    """Dynamic int8 quantisation of `module`'s linear layers, one weight scale per output channel (torch's CPU
    int8 path); in place, so pass a copy to keep the original."""
    import torch
    from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

    return quantize_dynamic(module.cpu(), {torch.nn.Linear: per_channel_dynamic_qconfig})


class PerWeights:
    """One object derived from a module's weights (an ONNX session, an int8 copy) for one variant, kept while
    the weights stay the same and rebuilt once they change in place."""

    def __init__(self) -> None:
        self._key: tuple | None = None
        self._value: object = None

    def get(self, module, variant, build: Callable[[], object]):
        key = (weights_version(module), variant)
        if key != self._key:
            self._value, self._key = build(), key
        return self._value


class LoadedFrom:
    """The `files_digest` of the folder a module was loaded from, which names its weights while they stay as
    loaded: the graph cache then needs no hash of the live weights (seconds a start), and `cached_graph` finds
    the same graph in the next process."""

    def __init__(self, digest: str, module) -> None:
        self.digest, self._version = digest, weights_version(module)

    def digest_of(self, module) -> str | None:
        """The digest while `module`'s weights are the ones loaded, else None (hash them)."""
        return self.digest if weights_version(module) == self._version else None


def onnx_cache_root() -> Path:
    return odqa_home() / "onnx"


# the graph cache keeps its most recently used graphs within this many bytes (the one just built always):
# weights that change between runs (a model retrained under one name, a checkpoint per evaluation) each leave
# a graph of their own behind, which filled gigabytes before anything removed them
ONNX_CACHE_BUDGET_BYTES = 4 << 30
# nor is a graph used this recently removed: another process may be opening it
ONNX_CACHE_GRACE_SECONDS = 600


def _mark_used(graph: Path) -> None:
    """A cached graph's folder carries its last use as its modification time (what pruning orders by)."""
    if graph.parent.parent == onnx_cache_root():
        try:
            os.utime(graph.parent)
        except OSError:
            pass  # a read-only cache still serves its graphs


def prune_graph_cache(keep: Path, budget: int | None = None) -> list[Path]:
    """Remove the least recently used graph folders beyond `budget` bytes, never `keep` nor one used in the
    last ONNX_CACHE_GRACE_SECONDS; returns the removed folders."""
    budget = ONNX_CACHE_BUDGET_BYTES if budget is None else budget
    root = onnx_cache_root()
    folders = []
    for folder in root.iterdir() if root.is_dir() else ():
        if folder.is_dir() and "." not in folder.name:  # a build's temporary folder is "NAME.random"
            try:
                size = sum(f.stat().st_size for f in folder.iterdir() if f.is_file())
                folders.append((folder.stat().st_mtime, folder, size))
            except OSError:
                continue  # removed meanwhile by another process
    folders.sort(key=lambda item: -item[0])
    total, removed, now = 0, [], time.time()
    for used, folder, size in folders:
        total += size
        if total > budget and folder != keep and now - used > ONNX_CACHE_GRACE_SECONDS:
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    if removed:
        log.info(
            "removed %d least recently used ONNX graphs from %s (the cache keeps %.1f GB)",
            len(removed),
            root,
            budget / 2**30,
        )
    return removed


def graph_path(kind: str, weights_digest: str, int8: bool) -> Path:
    """Where the graph of a `kind` model whose weights `weights_digest` names is cached (built or not)."""
    digest = hashlib.sha1(f"{GRAPH_RECIPE}:{weights_digest}".encode()).hexdigest()
    return onnx_cache_root() / f"{kind}-{digest[:20]}" / ("model.int8.onnx" if int8 else "model.onnx")


@dataclass(frozen=True)
class ModelFiles:
    """A model's files, resolved once per load: the name as given, the folder (or hub name) `from_pretrained`
    takes, and the digest naming its weights (None for a hub name or a folder without weights: nothing on disk
    names those). `variant`: what else shapes its graph (an encoder's pooling)."""

    name: str
    path: str
    digest: str | None

    @classmethod
    def resolve(cls, name_or_path: str, variant: str = "", folder: str | None = None) -> ModelFiles:
        """`folder`: `name_or_path` already resolved (odqa.core.models.resolve_model), where the caller has it."""
        from odqa.core.models import model_fingerprint, resolve_model

        name = str(name_or_path).strip()
        path = folder or resolve_model(name)
        weights = Path(path)
        weighed = weights.is_dir() and (any(weights.glob("*.safetensors")) or any(weights.glob("*.bin")))
        # the name as given: the same weights installed elsewhere share the graph
        digest = (
            (f"files:{model_fingerprint(name, folder=path)}" + (f":{variant}" if variant else "")) if weighed else None
        )
        return cls(name, path, digest)


def files_digest(name_or_path: str, variant: str = "", folder: str | None = None) -> str | None:
    """A digest naming the weights of a model folder by its weight files (ModelFiles.digest)."""
    return ModelFiles.resolve(name_or_path, variant, folder).digest


def cached_graph(
    kind: str, name_or_path: str | ModelFiles, plan: InferencePlan, variant: str = "", folder: str | None = None
) -> OnnxModel | None:
    """The session of the already-built graph of a model's weight files when `plan` runs onnx, else None (the
    caller then loads the torch module, which builds the graph on first use). `folder`: as for ModelFiles."""
    if isinstance(name_or_path, ModelFiles):
        files = name_or_path
    else:
        files = ModelFiles.resolve(name_or_path, variant, folder)
    # without tokenizer.json only transformers' auto classes, which import torch, can tokenize
    if plan.runtime != "onnx" or not (Path(files.path) / "tokenizer.json").is_file():
        return None
    path = graph_path(kind, files.digest, plan.precision == "int8") if files.digest else None
    return OnnxModel(path) if path is not None and path.is_file() else None


class PretrainedRuntime:
    """What the reader and the linker share at question time: the torch module built on first need (`load_model`),
    the cached ONNX graph of their weight files (`session`, named by the files' digest), and the ONNX session of
    the current weights (`onnx_session`), rebuilt once they change in place (training). The text encoders, torch
    modules themselves, share the digest, `cached_graph` and `PerWeights` instead."""

    def __init__(
        self,
        model=None,
        load_model: Callable[[], Any] | None = None,
        session: OnnxModel | None = None,
        weights_digest: str | None = None,
    ) -> None:
        self._model = model
        self._load_model = load_model
        self._session = session
        self._weights_digest = weights_digest
        self._loaded_from: LoadedFrom | None = None  # of a module loaded from a local folder
        self._onnx = PerWeights()  # the ONNX Runtime session of the current weights

    def _prepared(self, module):
        """The module as this model runs it (on its device, in eval mode)."""
        return module.eval()

    @property
    def model(self):
        """The torch module (built on first use where the model was made from a cached graph)."""
        if self._model is None:
            assert self._load_model is not None  # a model made without its module can build it
            self._model = self._prepared(self._load_model())
            if self._weights_digest:
                self._loaded_from = LoadedFrom(self._weights_digest, self._model)
        return self._model

    @model.setter
    def model(self, module) -> None:
        self._model = self._prepared(module)

    def onnx_session(self, int8: bool, build: Callable[[Any, str | None], OnnxModel]) -> OnnxModel:
        """The ONNX Runtime session of the current weights: the files' cached graph while no module was built,
        else `build(module, digest)` (digest: the files' while the weights are as loaded, else None), kept while
        the weights stay the same."""
        if self._model is None and self._session is not None and self._session.path.name.endswith(".int8.onnx") == int8:
            return self._session
        module = self.model  # built first: building it records the files it came from
        digest = self._loaded_from.digest_of(module) if self._loaded_from else None
        return self._onnx.get(module, int8, lambda: build(module, digest))


def fast_tokenizer(path: str | Path):
    """The fast tokenizer of a model folder (its tokenizer.json and tokenizer_config.json), loaded without
    torch: AutoTokenizer goes through transformers' model mappings, which import torch (2-3 s)."""
    from transformers import PreTrainedTokenizerFast

    # the generic class asks for no token type ids, which a BERT-style pair needs; tokenizer.json's
    # post-processor gives them (all 0 for models of one segment type, as the graphs' defaults)
    return PreTrainedTokenizerFast.from_pretrained(
        str(path), local_files_only=True, model_input_names=list(TOKEN_INPUTS)
    )


class OnnxModel:
    """One ONNX Runtime session: feeds named numpy arrays, returns the graph's outputs in order."""

    def __init__(self, path: str | Path, threads: int | None = None):
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or _torch_threads()
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # threads that spin after a run take the cores from what comes next: a question's encoder, FAISS search,
        # linker and reader take turns on them (2 cores: a whole `ask` 30-34 instead of 55-56 ms median; one
        # session alone, or eval-qa's batches, ran as fast either way: bench/results/speed-avx2.md)
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.path = Path(path)
        self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        _mark_used(self.path)
        self.input_names = [i.name for i in self.session.get_inputs()]

    def run(self, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        feeds = dict(feeds)
        if "token_type_ids" not in feeds:  # XLM-R style tokenizers (multilingual e5) give none: all segment 0
            feeds["token_type_ids"] = np.zeros_like(np.asarray(feeds["input_ids"]))
        return self.session.run(None, {k: np.asarray(feeds[k], dtype=np.int64) for k in self.input_names})

    @classmethod
    def for_module(
        cls,
        module,
        kind: str,
        outputs: Sequence[str],
        int8: bool,
        forward: Callable | None = None,
        transformer=None,
        inputs: Sequence[str] = TOKEN_INPUTS,
        quiet: bool = False,
        weights_digest: str | None = None,
    ) -> OnnxModel:
        """The cached graph of `module` (exported on first use). `forward(module, input_ids, attention_mask,
        token_type_ids)` returns the outputs named `outputs` (default: the module called with those inputs);
        `transformer`: the Hugging Face model inside `module` (its config sizes the fused attention).
        `weights_digest`: a digest that names the module's weights already (`files_digest` of the folder it was
        loaded from, unchanged since), which spares hashing the live weights on every start and lets
        `cached_graph` find the graph without the module."""
        transformer = module if transformer is None else transformer
        target = graph_path(kind, weights_fingerprint(module) if weights_digest is None else weights_digest, int8)
        folder = target.parent
        if not target.is_file():
            if not quiet:
                log.info(
                    "building the %sONNX graph of the %s in %s (once per model)...",
                    "int8 " if int8 else "",
                    kind,
                    folder,
                )
            if int8 and (folder / "model.onnx").is_file():
                _quantise_cached(folder)
            else:
                _build(module, transformer, folder, outputs, inputs, forward, int8)
            prune_graph_cache(keep=folder)
        return cls(target)


def _torch_threads() -> int:
    """The thread count a process that loaded torch set for it (`--threads`), else 0: ONNX Runtime's default,
    one thread per physical core, as torch's. Never imports torch: that is what a cached graph spares."""
    torch = sys.modules.get("torch")
    return torch.get_num_threads() if torch is not None else 0


def _exportable(module, forward, inputs):
    """`module` with positional token inputs and only the wanted outputs, as the exporter wants it."""
    import torch

    class Exportable(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = module

        def forward(self, *args):
            named = dict(zip(inputs, args))
            if forward is not None:
                return forward(self.inner, **named)
            return tuple(self.inner(**named).values())

    return Exportable()


def _build(
    module, transformer, folder: Path, outputs: Sequence[str], inputs: Sequence[str], forward, int8: bool
) -> None:
    """Export, optimise and (for `int8`) quantise into a temporary folder beside `folder`, then rename it into
    place. The int8 graph is made only when asked for: most models run fp32 under `auto`, and quantising is
    most of a first start's graph building (the multilingual encoder's large embedding table above all)."""
    import warnings

    import torch

    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=folder.name + ".", dir=folder.parent))
    try:
        clone = copy.deepcopy(module).float().eval()
        clone_transformer = _find_same(clone, module, transformer)
        if hasattr(clone_transformer, "set_attn_implementation"):
            clone_transformer.set_attn_implementation("eager")  # the form ORT's optimiser fuses into Attention
        example = torch.ones((2, 16), dtype=torch.long)
        args = tuple(example if name != "token_type_ids" else torch.zeros_like(example) for name in inputs)
        axes = {name: {0: "batch", 1: "tokens"} for name in inputs}
        with warnings.catch_warnings(), torch.inference_mode(False), torch.no_grad():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                _exportable(clone, forward, inputs),
                args,
                str(tmp / "export.onnx"),
                input_names=list(inputs),
                output_names=list(outputs),
                dynamic_axes=axes,
                opset_version=17,
                dynamo=False,
            )
        _optimise(tmp / "export.onnx", tmp / "model.onnx", clone_transformer.config)
        if int8:
            _quantise(tmp / "model.onnx", tmp / "model.int8.onnx")
        (tmp / "export.onnx").unlink()
        if (folder / "model.onnx").is_file():  # another process built the fp32 graph meanwhile
            if int8 and not (folder / "model.int8.onnx").is_file():
                os.replace(tmp / "model.int8.onnx", folder / "model.int8.onnx")
        else:
            shutil.rmtree(folder, ignore_errors=True)  # a leftover of an older, interrupted layout
            os.replace(tmp, folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _quantise_cached(folder: Path) -> None:
    """The int8 graph of a cached fp32 graph, written beside it under a temporary name and renamed into place."""
    handle, name = tempfile.mkstemp(prefix="model.int8.", suffix=".tmp.onnx", dir=folder)
    os.close(handle)
    try:
        _quantise(folder / "model.onnx", Path(name))
        os.replace(name, folder / "model.int8.onnx")
    finally:
        Path(name).unlink(missing_ok=True)


def _find_same(clone, original, wanted):
    """The submodule of `clone` at the place `wanted` has in `original`."""
    if wanted is original:
        return clone
    for name, sub in original.named_modules():
        if sub is wanted:
            return clone.get_submodule(name)
    raise OdqaError("internal: the transformer is not a submodule of the exported module")


def _optimise(source: Path, target: Path, config) -> None:
    with root_logging_kept():  # the optimiser's modules log through the root logger too
        from onnxruntime.transformers.optimizer import MODEL_TYPES, optimize_model

        model_type = config.model_type if config.model_type in MODEL_TYPES else "bert"
        optimised = optimize_model(
            str(source),
            model_type=model_type,
            num_heads=int(config.num_attention_heads),
            hidden_size=int(config.hidden_size),
            opt_level=1,
        )
        optimised.save_model_to_file(str(target))


def _quantise(source: Path, target: Path) -> None:
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    # fused nodes (Attention, SkipLayerNormalization) have no shape-inferred types; their outputs are float
    with root_logging_kept():  # its warnings would install a root handler that outlives the call
        quantize_dynamic(
            str(source),
            str(target),
            per_channel=True,
            weight_type=QuantType.QInt8,
            extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
        )


def pad_batch(rows: Sequence[Sequence[int]], pad_id: int, type_rows: Sequence[Sequence[int]] | None = None):
    """Right-padded input_ids, attention_mask and token_type_ids (numpy int64) for token-id rows of any length."""
    n = max(len(r) for r in rows)
    ids = np.full((len(rows), n), pad_id, dtype=np.int64)
    mask = np.zeros((len(rows), n), dtype=np.int64)
    types = np.zeros((len(rows), n), dtype=np.int64)
    for r, row in enumerate(rows):
        ids[r, : len(row)] = row
        mask[r, : len(row)] = 1
        if type_rows is not None:
            types[r, : len(row)] = type_rows[r]
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
