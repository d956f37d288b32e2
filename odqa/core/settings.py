"""Metadata of the settings dataclasses (odqa.config, the training configs): a field's help text and argparse
extras (choices, metavar), read by the command line (odqa.commands.options) so each option is declared once.

The one rule of every numeric setting lives here too (`Number`, `number_rule`): a finite int or float within the
field's bounds. Every source of a value goes through it: a command-line flag (as the flag's argparse type), a
config file and the overrides of `OdqaConfig.load` (`check_number`), and the HTTP request body (odqa.serve); so a
NaN, an infinity or an out-of-range value is refused in one line naming the setting, the value, where it came
from and the allowed range, wherever it is given."""

from __future__ import annotations

import argparse
import dataclasses
import math
import types
import typing
from dataclasses import dataclass, field
from typing import Any

from odqa.core.device import AUTOCAST_PRECISIONS, DEVICE_HELP
from odqa.core.errors import OdqaError

TRAINING_PRECISIONS = AUTOCAST_PRECISIONS  # of the models trained on CPU or GPU


def field_help(text: str, **more: Any) -> dict[str, Any]:
    """`field(metadata=field_help("..."))`: the option's help, plus any argparse extras."""
    return {"help": text, **more}


@dataclass(frozen=True)
class Number:
    """The rule of a numeric setting: a finite int or float, at least `minimum` (None: unbounded), at most
    `maximum`. Called on a command-line text it is the option's argparse type (a bad value ends in argparse's
    one-line error naming the option and the bound, before any work); `refusal` judges a value already parsed
    (a config file's, a request body's). Dataclass fields get theirs from `number_type`; hand-written options
    name one of odqa.commands.options' constants."""

    kind: type
    minimum: float | None = None
    maximum: float | None = None

    @property
    def __name__(self) -> str:  # argparse's fallback message names the type
        return "whole number" if self.kind is int else "number"

    def __call__(self, text: str):
        try:
            value = self.kind(text)
        except (TypeError, ValueError):
            raise argparse.ArgumentTypeError(f"expected {self.describe()}, got {text!r}") from None
        if self.refusal(value):
            raise argparse.ArgumentTypeError(f"expected {self.describe()}, got {text}")
        return value

    def refusal(self, value: Any) -> str | None:
        """Why a parsed `value` breaks the rule, as "is not a finite number" (None: it keeps it)."""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return f"is not {'a whole number' if self.kind is int else 'a number'}"
        if not math.isfinite(value):
            return "is not a finite number"
        if self.kind is int and not isinstance(value, int):
            return "is not a whole number"
        if (self.minimum is not None and value < self.minimum) or (self.maximum is not None and value > self.maximum):
            return "is out of range"
        return None

    def describe(self) -> str:
        noun = "a whole number" if self.kind is int else "a finite number"
        if self.minimum == 1 and self.kind is int and self.maximum is None:
            return "a positive whole number"
        bounds = [
            f">= {self.minimum:g}" if self.minimum is not None else "",
            f"<= {self.maximum:g}" if self.maximum is not None else "",
        ]
        return " ".join([noun, *filter(None, bounds)])


def field_default(owner: type, name: str) -> Any:
    """The default of a dataclass field (its default_factory called)."""
    field = {f.name: f for f in dataclasses.fields(owner)}[name]
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    raise ValueError(f"{owner.__name__}.{name} has no default")


def number_type(owner: type, field: dataclasses.Field, kind: type) -> Number:
    """A field's rule: `metadata["minimum"]` where given; else an int field defaulting to 0 (0: off, all,
    auto) takes 0 or more and any other int field 1 or more; a float field at least 0 unless its default is
    negative or unset (thresholds on scores); `metadata["maximum"]` where given; finite always."""
    default = field_default(owner, field.name)
    values = [v for v in (default if isinstance(default, (list, tuple)) else [default]) if v is not None]
    if "minimum" in field.metadata:
        minimum = field.metadata["minimum"]
    elif kind is int:
        minimum = 0 if 0 in values else 1
    else:
        minimum = 0 if values and min(values) >= 0 else None
    return Number(kind, minimum, field.metadata.get("maximum"))


def number_rule(owner: type, name: str) -> Number | None:
    """The rule of `owner`'s field `name` where it holds a number (`int`, `float`, `X | None`, `list[X]`), else
    None."""
    hint = typing.get_type_hints(owner)[name]
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        kinds = [a for a in typing.get_args(hint) if a is not type(None)]
        hint = kinds[0] if len(kinds) == 1 else None
    if typing.get_origin(hint) in (list, tuple):
        hint = (typing.get_args(hint) or (None,))[0]
    if hint not in (int, float):
        return None
    return number_type(owner, {f.name: f for f in dataclasses.fields(owner)}[name], hint)


def number_refused(setting: str, value: Any, rule: Number, source: str) -> str | None:
    """The one-line refusal of `value` for `setting` given by `source` ("from odqa.toml"), or None where the
    rule keeps it."""
    why = rule.refusal(value)
    return None if why is None else f"{setting} = {value!r} ({source}) {why}; give {rule.describe()}"


def check_number(setting: str, value: Any, rule: Number | None, source: str) -> None:
    """Refuse (OdqaError) a value of a numeric setting that breaks its rule; None (unset) and a list's every
    element are checked as the option would."""
    if rule is None or value is None:
        return
    for one in value if isinstance(value, (list, tuple)) else [value]:
        message = number_refused(setting, one, rule, source)
        if message:
            raise OdqaError(message)


def value_refusal(owner: type, name: str, value: Any) -> tuple[str, str] | None:
    """(why, what to give) where `value` breaks the rule of `owner`'s field `name` by its declared type: a number
    its `Number` (finite, within bounds; a bool is no number), a bool a JSON true or false, a text a string (one of
    `metadata["choices"]` where given), a list a list of such; None only where the field is `X | None`. None where
    the value keeps the rule (or the field's type is none of these)."""
    hint = typing.get_type_hints(owner)[name]
    metadata = {f.name: f for f in dataclasses.fields(owner)}[name].metadata
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        kinds = [a for a in args if a is not type(None)]
        hint = kinds[0] if len(kinds) == 1 else None
    element = hint
    if typing.get_origin(hint) in (list, tuple):
        if not isinstance(value, list):
            return "is not a list", "a list"
        element = (typing.get_args(hint) or (None,))[0]
        items = value
    else:
        items = [value]
    rule = number_rule(owner, name)
    for item in items:
        if rule is not None:
            why = rule.refusal(item)
            if why:
                return why, rule.describe()
        elif element is bool and not isinstance(item, bool):
            return "is not true or false", "true or false"
        elif element is str:
            choices = metadata.get("choices")
            if not isinstance(item, str):
                return "is not a text", "a quoted text" + (f": one of {', '.join(choices)}" if choices else "")
            if choices and item not in choices:
                return "is not a known choice", f"one of {', '.join(choices)}"
        elif element is dict and not isinstance(item, dict):
            return "is not an object", "a JSON object"
    return None


def check_numbers(settings: Any, prefix: str = "", source: str = "the config") -> None:
    """`check_number` on every numeric field of a settings dataclass instance (`prefix`: its section, as
    "retrieval.")."""
    for f in dataclasses.fields(settings):
        check_number(prefix + f.name, getattr(settings, f.name), number_rule(type(settings), f.name), source)


@dataclass(kw_only=True)
class RunOptions:
    """The run settings the reader's and the retriever's trainers share (keyword-only, so they follow each config's
    own fields). A trainer with another default redeclares the field with `field(default=..., kw_only=True)`."""

    keep_checkpoints: int = 2
    log_every: int = field(default=20, metadata=field_help("log the loss every N steps"))
    threads: int = field(default=0, metadata=field_help("torch CPU threads (0: torch's default)"))
    precision: str = field(
        default="auto", metadata=field_help("training precision (auto: fp32 on CPU)", choices=TRAINING_PRECISIONS)
    )
    device: str = field(default="", metadata=field_help(DEVICE_HELP))
    progress: bool = field(default=True, metadata=field_help("progress bar (--no-progress: log lines only)"))

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)
