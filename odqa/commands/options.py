"""Command-line options generated from the configuration dataclasses, so each default is written once: in its
dataclass (`odqa.config`, the training configs, `IndexSpec`, ...), never again in a command.

`add_options(parser, Dataclass, include=[...])` adds one option per field: its type, its default, its
choices (`metadata={"choices": ...}`: a tuple, a backend `Registry`, or a function giving one, read when the parser is
built), its help
(`metadata={"help": ...}`), booleans as `--flag/--no-flag`, lists as `nargs`. Two kinds of option:

* plain (the default): the option's default is the field's; `dataclass_values(args, Dataclass)` gives the
  keyword arguments of the dataclass back, so a command builds it with `Dataclass(**dataclass_values(...))`.
* config overrides (`section="retrieval"`, or `""` for `OdqaConfig`'s own fields): the option defaults to
  None ("not given") so that a `--config` file's value is kept unless the flag is passed; the help names the
  setting and its default. `config_overrides(args)` gives the `{"retrieval.k": 20}` dict `OdqaConfig.load`
  applies.

Every generated option is recorded on its parser (`option_sources`), so the tests can walk all commands and
check each default against its dataclass.
"""

from __future__ import annotations

import argparse
import collections.abc
import dataclasses
import types
import typing
from collections.abc import Iterable, Mapping
from typing import Any

from odqa.commands.common import add_output

# the rule of every numeric option (its argparse type), shared with the config files and the HTTP API
from odqa.core.settings import Number, field_default, number_type  # noqa: F401 (field_default: re-exported)

SOURCES = "option_sources"  # parser default: OptionSource of every generated option


# hand-written options' types (a dataclass field's own comes from number_type)
POSITIVE_INT = Number(int, 1)  # counts that must be at least one: k, batch sizes, limits given
COUNT = Number(int, 0)  # counts where 0 has a meaning the help gives (all, none, off, torch's default)
SEED = Number(int, 0)
FRACTION = Number(float, 0, 1)
NON_NEGATIVE = Number(float, 0)


@dataclasses.dataclass(frozen=True)
class OptionSource:
    """Where a generated option comes from: `owner.field`, stored in `args.<dest>`; `section`: the config section
    it overrides (None: a plain option)."""

    owner: type
    field: str
    dest: str
    section: str | None = None

    @property
    def setting(self) -> str:
        """The dotted config key (`retrieval.k`) of a config override."""
        return f"{self.section}.{self.field}" if self.section else self.field


def add_options(
    parser: argparse.ArgumentParser,
    owner: type,
    include: Iterable[str] | None = None,
    *,
    rename: Mapping[str, str] | None = None,
    help: Mapping[str, str] | None = None,
    section: str | None = None,
) -> list[argparse.Action]:
    """Options for the fields `include` (in that order; default: every field with a default) of the dataclass
    `owner`. `rename`: field -> option name without the dashes (`{"kind": "vector-index"}`); `help`: field ->
    help text of this command (else the field's `metadata["help"]`); `section`: make them config overrides of
    that `OdqaConfig` section (see the module docstring)."""
    fields = {f.name: f for f in dataclasses.fields(owner)}
    hints = typing.get_type_hints(owner)
    names = list(include) if include is not None else [n for n, f in fields.items() if _has_default(f)]
    rename, help = dict(rename or {}), dict(help or {})
    for name in [*rename, *help]:
        if name not in names:
            raise ValueError(f"{owner.__name__}: {name!r} is renamed or described but not included")
    actions, sources = [], []
    for name in names:
        if name not in fields:
            raise ValueError(f"{owner.__name__} has no field {name!r}")
        field = fields[name]
        if not _has_default(field):
            raise ValueError(f"{owner.__name__}.{name} has no default: declare its option by hand (required=True)")
        action = _add_option(
            parser,
            owner,
            field,
            hints[name],
            rename.get(name, name.replace("_", "-")),
            help.get(name, field.metadata.get("help")),
            section,
        )
        actions.append(action)
        sources.append(OptionSource(owner, name, action.dest, section))
    parser.set_defaults(**{SOURCES: (*(parser.get_default(SOURCES) or ()), *sources)})
    return actions


def add_inference_options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """--precision, --runtime and --device of every command that runs models at question time (ask, search,
    eval-*, eval-reader, ...): OdqaConfig's settings as config overrides, one spelling and one set of choices."""
    from odqa.config import OdqaConfig

    return add_options(parser, OdqaConfig, ["precision", "runtime", "device"], section="")


def option_sources(args_or_parser) -> tuple[OptionSource, ...]:
    if isinstance(args_or_parser, argparse.ArgumentParser):
        return args_or_parser.get_default(SOURCES) or ()
    return getattr(args_or_parser, SOURCES, None) or ()


def dataclass_values(args: argparse.Namespace, owner: type) -> dict[str, Any]:
    """The parsed values of `owner`'s plain options, as its keyword arguments."""
    return {s.field: getattr(args, s.dest) for s in option_sources(args) if s.owner is owner and s.section is None}


def config_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """{dotted setting: value} of the config overrides passed (None: not given, the config file's value stays)."""
    return {s.setting: getattr(args, s.dest) for s in option_sources(args) if s.section is not None}


def _has_default(field: dataclasses.Field) -> bool:
    return field.default is not dataclasses.MISSING or field.default_factory is not dataclasses.MISSING


def _add_option(
    parser, owner: type, field: dataclasses.Field, hint: Any, flag: str, help: str | None, section: str | None
) -> argparse.Action:
    meta = field.metadata
    kind, is_list = _value_type(owner, field.name, hint)
    default = field_default(owner, field.name)
    kwargs: dict[str, Any] = {}
    choices = meta.get("choices")
    if callable(choices):  # a registry defined after the dataclass, asked now
        choices = choices()
    if choices is not None:
        kwargs["choices"] = tuple(getattr(choices, "names", choices))  # a Registry gives its names
    if "metavar" in meta:
        kwargs["metavar"] = meta["metavar"]
    if section is not None:  # a config override: unset unless given, so the config file's value is kept
        setting = f"{section}.{field.name}" if section else field.name
        fallback = "" if default in (None, "") else f", else {default}"  # the help says what unset means
        help = f"{help + ' ' if help else ''}(default: the config's {setting}{fallback})"
        default = None
    if kind is bool:
        kwargs["action"] = argparse.BooleanOptionalAction
    else:
        kwargs["type"] = number_type(owner, field, kind) if kind in (int, float) else kind
        if is_list:
            kwargs["nargs"] = meta.get("nargs", "+" if default else "*")
    flags = [f"--{flag}"]
    output = meta.get("output")  # "file" or "folder": checked before the command starts (add_output)
    if output:
        return add_output(parser, *flags, folder=output == "folder", default=default, help=help, **kwargs)
    return parser.add_argument(*flags, default=default, help=help, **kwargs)


def _value_type(owner: type, name: str, hint: Any) -> tuple[type, bool]:
    """(the type argparse converts to, whether the field is a list): `int`, `X | None` -> X, `list[X]` -> X."""
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        kinds = [a for a in args if a is not type(None)]
        if len(kinds) != 1:
            raise TypeError(f"{owner.__name__}.{name}: cannot make an option of {hint}")
        return _value_type(owner, name, kinds[0])
    if typing.get_origin(hint) in (list, tuple, collections.abc.Sequence) or hint in (list, tuple):
        element = args[0] if args else str
        return element, True
    if hint in (str, int, float, bool):
        return hint, False
    raise TypeError(f"{owner.__name__}.{name}: cannot make an option of {hint}; declare it by hand")
