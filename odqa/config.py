"""One configuration for the whole system: a dataclass loaded from TOML (or YAML) and overridden by CLI flags."""

from __future__ import annotations

import dataclasses
import sys
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from odqa.core.device import DEVICE_HELP, check_device_name
from odqa.core.errors import OdqaError
from odqa.core.runtime import INFERENCE, PRECISIONS, RUNTIMES, InferenceSettings
from odqa.core.secrets import is_secret_setting, remember, scrub, secret_values_in
from odqa.core.settings import check_number, check_numbers, number_rule
from odqa.core.settings import field_help as _help
from odqa.linker.settings import LinkerSettings
from odqa.reader.settings import ReaderSettings
from odqa.retriever.registry import RetrieverRuntime, check_location
from odqa.retriever.settings import RetrievalConfig

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, from PyPI
    import tomli as tomllib


@dataclass
class ElasticConfig:
    """[elastic]: an Elasticsearch (8.x/9.x) cluster holding passages and their vectors (see docs/elasticsearch.md).

    Secrets may instead come from the environment (ODQA_ES_API_KEY, ODQA_ES_PASSWORD); they are never printed.
    """

    hosts: str = field(default="http://127.0.0.1:9200", metadata=_help("comma-separated Elasticsearch URLs"))
    api_key: str = field(default="", repr=False)
    username: str = field(
        default="", metadata=_help("basic-auth user; the password comes from the config or ODQA_ES_PASSWORD")
    )
    password: str = field(default="", repr=False)
    verify_certs: bool = True
    ca_certs: str = ""  # CA bundle for a self-signed cluster certificate
    index_name: str = field(default="odqa-passages", metadata=_help("Elasticsearch index name"))
    num_candidates: int = field(default=100, metadata=_help("kNN candidates per shard"))

    def validate(self) -> None:
        if not [h for h in self.hosts.split(",") if h.strip()]:
            raise OdqaError("config: elastic.hosts must name at least one URL, e.g. http://127.0.0.1:9200")
        check_numbers(self, "elastic.")
        if not self.index_name or self.index_name != self.index_name.lower():
            raise OdqaError(f"config: elastic.index_name must be a non-empty lower-case name, got {self.index_name!r}")


@dataclass
class CorpusConfig:
    """[corpus]: which column (or JSON key) of a corpus holds each field; empty: the usual names (id or _id,
    title, text or contents; odqa.corpus.readers)."""

    id_field: str = field(
        default="", metadata=_help("column/key of the document id (empty: the first of id, _id, docid, doc_id)")
    )
    title_field: str = field(default="", metadata=_help("column/key of the title (empty: title, if present)"))
    text_field: str = field(
        default="", metadata=_help("column/key of the text (empty: text, contents, content or body)")
    )


@dataclass
class OdqaConfig:
    # index folder built by `run_qa.py index`, or an Elasticsearch index loaded by `es-index`:
    # "es://host:9200/name" ("es://": [elastic]'s hosts and index_name); empty: the built-in demo corpus
    index: str = field(
        default="",
        metadata=_help(
            "index folder, or an Elasticsearch index es://HOST:9200/NAME "
            "(es://: the config's [elastic]); empty: the built-in demo corpus"
        ),
    )
    corpus: CorpusConfig = field(default_factory=CorpusConfig)
    retrieval: RetrievalConfig = field(default_factory=RetrievalConfig)
    # the reader's own settings (reader.settings.ReaderSettings), its defaults defined there
    reader: ReaderSettings = field(default_factory=ReaderSettings)
    linker: LinkerSettings = field(default_factory=LinkerSettings)
    elastic: ElasticConfig = field(default_factory=ElasticConfig)
    # inference of the reader, the encoders and the linker (odqa.core.runtime.plan_inference): auto = fp16 on
    # CUDA; on CPUs, onnx int8 for the models whose int8 cost is measured within 1 F1 (the English reader), else
    # bf16 where the CPU has native bf16 (questions: onnx fp32), onnx fp32 elsewhere
    precision: str = field(
        default=INFERENCE.precision,
        metadata=_help(
            "inference precision of all models (auto: on CPUs onnx int8 for the models whose int8 cost is measured "
            "within 1 F1, e.g. the English reader; else bf16 where native, questions onnx fp32, else onnx fp32)",
            choices=PRECISIONS,
        ),
    )
    runtime: str = field(
        default=INFERENCE.runtime, metadata=_help("inference runtime (auto: see --precision)", choices=RUNTIMES)
    )
    # where the reader, the encoders and the linker run (empty: the question-time models on the cpu unless a
    # CUDA device is visible, as odqa.core.device.pick_device)
    device: str = field(default="", metadata=_help(DEVICE_HELP))

    def validate(self) -> OdqaConfig:
        _choice("precision", self.precision, PRECISIONS)
        _choice("runtime", self.runtime, RUNTIMES)
        check_device_name(self.device, "config: device")
        self.retrieval.validate(self.index)
        self.reader.validate()
        self.linker.validate()
        self.elastic.validate()
        check_location(self.index, self)
        return self

    def to_dict(self) -> dict[str, Any]:
        """The settings as plain data, a secret's value (elastic.password, elastic.api_key) masked: whatever
        prints or writes the dict must not carry it."""
        return _masked(dataclasses.asdict(self))

    def inference(self) -> InferenceSettings:
        """How the models this config names run (odqa.core.runtime.InferenceSettings)."""
        return InferenceSettings(self.precision, self.runtime)

    def retriever_runtime(self, accept_encoder_change: bool = False) -> RetrieverRuntime:
        """How the question encoder of a retriever built with this config runs (retriever.registry.build_retriever,
        with `retrieval`)."""
        return RetrieverRuntime(self.inference(), self.device or None, accept_encoder_change)

    @classmethod
    def load(cls, path: str | Path | None = None, overrides: dict[str, Any] | None = None) -> OdqaConfig:
        """Load a TOML, YAML or JSON file (optional; by its suffix), then apply dotted overrides such as
        {"retrieval.k": 50}."""
        config = cls()
        if path:
            _apply(config, _read_file(Path(path)), source=str(path))
        for dotted, value in (overrides or {}).items():
            if value is None:
                continue
            _set_dotted(config, dotted, value, source="the command line")
        return config.validate()


SECRET_MASK = "***"  # as odqa.core.secrets.scrub writes a secret


def _masked(settings: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """`settings` with the value of every secret setting given (non-empty) replaced by SECRET_MASK."""
    out = {}
    for key, value in settings.items():
        if isinstance(value, dict):
            value = _masked(value, f"{prefix}{key}.")
        elif value and is_secret_setting(prefix + key):
            value = SECRET_MASK
        out[key] = value
    return out


CONFIG_FORMATS = {".yaml": "YAML", ".yml": "YAML", ".json": "JSON"}  # by suffix; any other file is TOML


def _read_file(path: Path) -> dict[str, Any]:
    from odqa.core.inputs import read_input

    data_bytes = read_input(path, "config file", "check the path passed to --config", error=OdqaError)
    try:
        text = data_bytes.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise OdqaError(f"config file {path} is not UTF-8 text (byte {exc.start}); save it as UTF-8") from exc
    kind = CONFIG_FORMATS.get(path.suffix.lower(), "TOML")
    try:
        if kind == "YAML":
            import yaml

            data = yaml.load(text, Loader=_unique_keys_yaml_loader()) or {}
        elif kind == "JSON":
            from odqa.core import strict_json

            data = strict_json.loads(text) if text.strip() else {}
        else:
            data = tomllib.loads(text)
    except Exception as exc:  # tomllib/yaml/json raise their own error types (RecursionError: nested too deeply)
        twice = _key_given_twice(exc, text)
        if twice:  # the last one would win without a word: which did the user mean?
            raise OdqaError(f"config file {path}: {twice}; keep one of them") from None
        # one line, where and what, never the lines themselves: the parser's excerpt would show a password
        problem = scrub(" ".join(_syntax_problem(exc).split()), secret_values_in(text))
        other = (
            ""
            if path.suffix.lower() in (".toml", *CONFIG_FORMATS)
            else (" (a config file is TOML, or YAML or JSON named .yaml, .yml or .json)")
        )
        raise OdqaError(f"config file {path} is not valid {kind}{other}: {problem}; correct it there") from None
    if not isinstance(data, dict):
        raise OdqaError(f"config file {path} must hold a table of settings")
    return data


class _DuplicateYamlKey(ValueError):
    pass


def _unique_keys_yaml_loader():
    """PyYAML's safe loader, refusing a mapping that names a key twice (PyYAML keeps the last)."""
    import yaml

    class UniqueKeyLoader(yaml.SafeLoader):
        def construct_mapping(self, node, deep=False):
            if isinstance(node, yaml.MappingNode):
                seen: set = set()
                for key_node, _ in node.value:
                    if key_node.tag == "tag:yaml.org,2002:merge":
                        continue
                    key = self.construct_object(key_node, deep=True)
                    try:
                        repeated = key in seen
                        seen.add(key)
                    except TypeError:  # an unhashable key: the constructor below says so
                        continue
                    if repeated:
                        raise _DuplicateYamlKey(
                            f"the key {str(key)!r} is given twice (line {key_node.start_mark.line + 1})"
                        )
            return super().construct_mapping(node, deep=deep)

    return UniqueKeyLoader


def _key_given_twice(exc: Exception, text: str) -> str | None:
    """ "the key 'k' is given twice (line N)" where a parser refused a key given twice, else None. tomllib refuses
    it as "Cannot overwrite a value (at line N, ...)" or "Cannot declare ('a', 'b') twice", naming no key: it is
    read from the line."""
    import re

    from odqa.core import strict_json

    if isinstance(exc, (strict_json.DuplicateKeyError, _DuplicateYamlKey)):
        return str(exc)
    message = str(exc)
    declared = re.match(r"Cannot declare \((.*)\) twice \(at line (\d+)", message)
    if declared:
        key = ".".join(part.strip().strip("'\"") for part in declared.group(1).split(",") if part.strip())
        return f"the table [{key}] is given twice (line {declared.group(2)})"
    inline = re.match(r"Duplicate inline table key '(.*)' \(at line (\d+)", message)
    if inline:
        return f"the key {inline.group(1)!r} is given twice (line {inline.group(2)})"
    overwritten = re.match(r"Cannot overwrite a value \(at line (\d+)", message)
    if overwritten:
        number = int(overwritten.group(1))
        lines = text.splitlines()
        line = lines[number - 1] if 0 < number <= len(lines) else ""
        key = line.split("=", 1)[0].strip() if "=" in line else ""
        return f"the key {key!r} is given twice (line {number})" if key else f"a key is given twice (line {number})"
    return None


def _syntax_problem(exc: Exception) -> str:
    """A parser's complaint without its excerpt of the file: PyYAML's problem and context with their line and
    column (its str() quotes the lines), tomllib's and json's message as it is (only the line and column)."""
    if isinstance(exc, RecursionError):
        return "nested too deeply to read"
    problem, mark = getattr(exc, "problem", None), getattr(exc, "problem_mark", None)
    if problem is None or mark is None:
        return str(exc).split("\n  in ")[0]
    where = f"{problem} at line {mark.line + 1}, column {mark.column + 1}"
    context, context_mark = getattr(exc, "context", None), getattr(exc, "context_mark", None)
    if context and context_mark is not None:
        where = f"{context} at line {context_mark.line + 1}, column {context_mark.column + 1}: {where}"
    return where


def _apply(target: Any, data: dict[str, Any], source: str, prefix: str = "") -> None:
    fields = {f.name: f for f in config_fields(target)}
    for key, value in data.items():
        if key not in fields:
            raise OdqaError(f"{source}: {_why_not_a_key(target, key, prefix)}; known here: {', '.join(sorted(fields))}")
        current = getattr(target, key)
        if dataclasses.is_dataclass(current):
            if not isinstance(value, dict):
                raise OdqaError(f"{source}: {prefix + key!r} must be a table of settings")
            _apply(current, value, source, prefix=f"{prefix}{key}.")
        else:
            kind = type(current) if current is not None else _optional_type(type(target), key)
            # the rule its command-line flag has (odqa.core.settings.Number): finite, within the field's bounds;
            # a number as written first (inf for a count is not finite, 2.5 not whole), then as converted
            rule = number_rule(type(target), key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                check_number(prefix + key, value, rule, f"from {source}")
            value = _coerce(prefix + key, kind, value, source)
            if isinstance(value, str) and is_secret_setting(prefix + key):
                remember(value)  # scrubbed from whatever prints it later (odqa.core.secrets)
            check_number(prefix + key, value, rule, f"from {source}")
            setattr(target, key, value)


def config_fields(settings: Any) -> list[dataclasses.Field]:
    """The fields of a settings class (or instance) a config section sets: not what a model records about itself,
    nor a top-level setting the section would spell a second time (reader.settings)."""
    return [f for f in dataclasses.fields(settings) if not (f.metadata.get("recorded") or f.metadata.get("top_level"))]


def _why_not_a_key(target: Any, key: str, prefix: str) -> str:
    f = next((f for f in dataclasses.fields(target) if f.name == key), None)
    if f is not None and f.metadata.get("recorded"):
        return f"{prefix + key!r} is recorded by the model itself (its reader_config.json), not a config setting"
    if f is not None and f.metadata.get("top_level"):
        return f"{prefix + key!r} is set for every model at the top level: write {key} = ... above the sections"
    return f"unknown setting {prefix + key!r}"


def _set_dotted(config: Any, dotted: str, value: Any, source: str) -> None:
    *parents, leaf = dotted.split(".")
    target = config
    for part in parents:
        target = getattr(target, part)
    _apply(target, {leaf: value}, source, prefix=".".join(parents) + "." if parents else "")


def _optional_type(owner: type, key: str) -> type:
    """X of a setting declared `X | None` (whose value is None now)."""
    hint = typing.get_type_hints(owner)[key]
    kinds = [k for k in typing.get_args(hint) if k is not type(None)]
    return kinds[0] if kinds else str


def _coerce(name: str, kind: type, value: Any, source: str) -> Any:
    if is_secret_setting(name) and kind is str and not isinstance(value, str):
        # a secret is the text as written: YAML 1.1 reads an unquoted 0777 as 511 and 12:30:00 as 45000, and
        # str() of that would be a wrong secret sent without a word
        raise OdqaError(
            f"{source}: {name!r} must be text as written, got a {type(value).__name__} (not shown: a secret); "
            "quote it in the file: unquoted, YAML reads digits (a leading zero as octal), times and yes/no as numbers "
            "and booleans"
        )
    if isinstance(value, kind) and not (kind is int and isinstance(value, bool)):
        return value
    try:
        if kind is bool and isinstance(value, str):
            if value.lower() in ("1", "true", "yes", "on"):
                return True
            if value.lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError(value)
        if kind is float and isinstance(value, (int, str)) and not isinstance(value, bool):
            return float(value)
        if kind is int and isinstance(value, str):
            return int(value)
        if kind is str and isinstance(value, (int, float)):
            return str(value)
    except ValueError:
        pass
    if is_secret_setting(name):  # the value of a secret is never shown, even a wrong one
        raise OdqaError(
            f"{source}: {name!r} must be {kind.__name__}, got a {type(value).__name__} (not shown: a "
            "secret); write it as a quoted string"
        )
    raise OdqaError(f"{source}: {name!r} must be {kind.__name__}, got {value!r}")


def _choice(name: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise OdqaError(f"config: {name} must be one of {', '.join(allowed)}; got {value!r}")
