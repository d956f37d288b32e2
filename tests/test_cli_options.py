"""Command-line options generated from the config dataclasses (odqa/commands/options.py): the helper itself, and
every command's defaults checked against the dataclasses they come from."""

from __future__ import annotations

import argparse
import dataclasses
import subprocess
import sys
from dataclasses import dataclass, field

import pytest

from odqa.cli import build_parser
from odqa.commands.common import OUTPUTS, HelpFormatter
from odqa.commands.options import add_options, config_overrides, dataclass_values, field_default, option_sources
from odqa.config import OdqaConfig
from odqa.core.registry import Registry

ENGINES = Registry("toy engine", {"fast": object, "exact": object})


@dataclass
class Toy:
    name: str
    words: int = field(default=100, metadata={"help": "passage length"})
    alpha: float = 0.5
    engine: str = field(default="fast", metadata={"choices": ENGINES})
    verbose: bool = False
    progress: bool = True
    files: list[str] = field(default_factory=list, metadata={"metavar": "FILE"})
    ks: list[int] = field(default_factory=lambda: [1, 5])
    threshold: float | None = None
    out: str = field(default="runs/toy", metadata={"output": "folder"})


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(formatter_class=HelpFormatter)
    add_options(parser, Toy, rename={"files": "file"})
    return parser


def test_options_take_type_default_choices_and_help_from_the_dataclass():
    parser = _parser()
    args = parser.parse_args([])
    assert Toy(name="x", **dataclass_values(args, Toy)) == Toy(name="x")
    args = parser.parse_args(
        [
            "--words",
            "7",
            "--alpha",
            "0.25",
            "--engine",
            "exact",
            "--verbose",
            "--no-progress",
            "--file",
            "a",
            "b",
            "--ks",
            "3",
            "10",
            "--threshold",
            "0.4",
        ]
    )
    toy = Toy(name="x", **dataclass_values(args, Toy))
    assert (toy.words, toy.alpha, toy.engine, toy.verbose, toy.progress) == (7, 0.25, "exact", True, False)
    assert toy.files == ["a", "b"] and toy.ks == [3, 10] and toy.threshold == 0.4
    text = parser.format_help()
    assert "passage length (default: 100)" in text and "{fast,exact}" in text and "--no-progress" in text
    assert "--file [FILE ...]" in text  # an empty list default: zero or more values
    # an output folder is declared like add_output's, so the CLI checks it before the command starts
    assert ("out", "--out", True) in parser.get_default(OUTPUTS)


def test_bad_choices_and_types_are_refused_by_argparse(capsys):
    for argv in (["--engine", "slow"], ["--words", "many"]):
        with pytest.raises(SystemExit) as exit_info:
            _parser().parse_args(argv)
        assert exit_info.value.code == 2
    assert "invalid choice: 'slow'" in capsys.readouterr().err


def test_config_overrides_stay_unset_unless_given(tmp_path):
    parser = argparse.ArgumentParser(formatter_class=HelpFormatter)
    add_options(parser, OdqaConfig, ["index"], section="")
    from odqa.config import RetrievalConfig
    from odqa.linker.settings import LinkerSettings

    add_options(parser, RetrievalConfig, ["k", "fusion"], section="retrieval")
    add_options(parser, LinkerSettings, ["enabled"], rename={"enabled": "linker"}, section="linker")
    config_file = tmp_path / "odqa.toml"
    config_file.write_text("[retrieval]\nk = 7\n[linker]\nenabled = false\n")

    kept = OdqaConfig.load(config_file, config_overrides(parser.parse_args([])))
    assert kept.retrieval.k == 7 and kept.linker.enabled is False
    given = OdqaConfig.load(config_file, config_overrides(parser.parse_args(["--k", "3", "--linker"])))
    assert given.retrieval.k == 3 and given.linker.enabled is True
    assert config_overrides(parser.parse_args(["--no-linker", "--fusion", "minmax"])) == {
        "index": None,
        "retrieval.k": None,
        "retrieval.fusion": "minmax",
        "linker.enabled": False,
    }
    assert "(default: the config's retrieval.k, else 10)" in " ".join(parser.format_help().split())


def test_helper_refuses_what_it_cannot_generate():
    with pytest.raises(ValueError, match="no default"):
        add_options(argparse.ArgumentParser(), Toy, ["name"])
    with pytest.raises(ValueError, match="no field"):
        add_options(argparse.ArgumentParser(), Toy, ["nmae"])
    with pytest.raises(ValueError, match="not included"):
        add_options(argparse.ArgumentParser(), Toy, ["words"], rename={"alpha": "weight"})


# ---- every command against its dataclasses -----------------------------------------------------------------


def _commands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(subparsers.choices)


# Options written by hand that share a field's name but mean something else on purpose: (command, dest) -> why.
DELIBERATE = {
    ("eval-reader", "batch_size"): "windows per forward pass of an evaluation run, not the pipeline's reader batch",
    ("fit-calibration", "retriever"): "the calibration is fitted on BM25's passages, as recorded in its source",
    ("index", "backends"): "the same backends (IndexSpec.backends), written as one comma-separated value",
    ("eval-retrieval", "k"): "the recall@k cut-offs reported, not the passages the reader reads",
    ("predict", "batch_size"): "questions linked and retrieved together, not the reader's windows per pass",
}


def stale_defaults(parser: argparse.ArgumentParser, command: str = "") -> list[str]:
    """Options whose default is not their dataclass field's: a generated one (a config override must default to
    None, so a config file's value is kept), or one written by hand with the dest of a field of a dataclass the
    command builds from its options, or of a config section it overrides (which must default to None too: any
    other default would replace the config file's value unasked)."""
    problems = []
    actions = {a.dest: a for a in parser._actions}
    sources = option_sources(parser)
    for source in sources:
        expected = None if source.section is not None else field_default(source.owner, source.field)
        got = actions[source.dest].default
        if got != expected:
            problems.append(f"--{source.dest}: {got!r}, {source.owner.__name__}.{source.field}: {expected!r}")
    generated = {s.dest for s in sources}
    plain = {s.owner for s in sources if s.section is None}
    overridden = {s.owner: s.section for s in sources if s.section is not None}
    skipped = DELIBERATE.keys()
    for owner in plain | overridden.keys():
        for f in dataclasses.fields(owner):
            action = actions.get(f.name)
            if action is None or f.name in generated or action.default is None or (command, f.name) in skipped:
                continue
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                continue
            if owner in plain and action.default == field_default(owner, f.name):
                continue
            if owner in overridden:
                setting = f"{overridden[owner]}.{f.name}" if overridden[owner] else f.name
                problems.append(f"--{f.name} (by hand): {action.default!r}, overrides {setting} of --config: None")
            else:
                problems.append(
                    f"--{f.name} (by hand): {action.default!r}, {owner.__name__}.{f.name}: "
                    f"{field_default(owner, f.name)!r}"
                )
    return problems


def test_every_command_default_is_its_dataclass_default():
    commands = _commands()
    problems = {name: p for name, parser in commands.items() if (p := stale_defaults(parser, name))}
    assert problems == {}
    generated = {name for name, parser in commands.items() if option_sources(parser)}
    # the commands whose options mirror a dataclass (the rest feed functions' keyword arguments)
    assert {
        "index",
        "search",
        "eval-retrieval",
        "ask",
        "predict",
        "shell",
        "eval-qa",
        "demo",
        "train-reader",
        "eval-reader",
        "fit-calibration",
        "link",
        "train-linker",
        "eval-linker",
        "train-retriever",
        "es-index",
        "es-search",
        "serve",
    } <= generated
    # the commands that take the config as overrides (checked above: their flags default to None, "the config's
    # value"); each reads a config file for those flags to override
    overriding = {
        name for name, parser in commands.items() if any(s.section is not None for s in option_sources(parser))
    }
    assert {
        "index",
        "search",
        "eval-retrieval",
        "ask",
        "predict",
        "shell",
        "eval-qa",
        "demo",
        "eval-reader",
        "link",
        "eval-linker",
        "es-index",
        "es-search",
        "serve",
    } <= overriding
    assert overriding <= {name for name, parser in commands.items() if any(a.dest == "config" for a in parser._actions)}


def test_the_check_finds_a_default_written_again_over_a_config_override():
    from odqa.config import RetrievalConfig

    parser = argparse.ArgumentParser()
    add_options(parser, RetrievalConfig, ["encoder"], section="retrieval")
    parser.add_argument("--alpha", type=float, default=0.3)  # would replace a config file's retrieval.alpha
    parser.add_argument("--fusion")  # None: the config's value
    assert stale_defaults(parser) == ["--alpha (by hand): 0.3, overrides retrieval.alpha of --config: None"]


def test_the_check_finds_a_default_written_again_by_hand():
    parser = argparse.ArgumentParser()
    add_options(parser, Toy, ["words"])
    parser.add_argument("--alpha", type=float, default=0.75)  # Toy.alpha is 0.5
    parser.add_argument("--engine", default="fast")  # the same as Toy's: fine
    assert stale_defaults(parser) == ["--alpha (by hand): 0.75, Toy.alpha: 0.5"]
    parser.set_defaults(words=50)  # a generated option's default changed afterwards
    assert stale_defaults(parser)[0] == "--words: 50, Toy.words: 100"


@pytest.mark.parametrize(
    "command,owner_path",
    [
        ("train-reader", "odqa.reader.training.train_config.TrainConfig"),
        ("train-retriever", "odqa.retriever.training.train_config.RetrieverTrainConfig"),
        ("train-linker", "odqa.linker.training.train_config.TrainConfig"),
    ],
)
def test_training_commands_build_their_config_with_its_defaults(command, owner_path, tmp_path):
    import importlib

    module, name = owner_path.rsplit(".", 1)
    owner = getattr(importlib.import_module(module), name)
    parser = _commands()[command]
    required = {
        "train-reader": ["--train", "t.json", "--output", str(tmp_path)],
        "train-retriever": ["--train", "t.jsonl", "--output", str(tmp_path)],
        "train-linker": [],
    }[command]
    values = dataclass_values(parser.parse_args(required), owner)
    fixed = {"train_files": ["t.json"], "output_dir": "x"} if command != "train-linker" else {}
    assert owner(**fixed, **values) == owner(**fixed)


def test_inverted_and_renamed_flags_keep_their_meaning(tmp_path):
    from odqa.retriever.training.train_config import RetrieverTrainConfig

    args = _commands()["train-retriever"].parse_args(
        [
            "--train",
            "t.jsonl",
            "--output",
            str(tmp_path),
            "--no-answer-mask",
            "--no-pool-validation",
            "--no-progress",
            "--val",
            "a.jsonl",
            "--early-stop",
            "3",
        ]
    )
    values = dataclass_values(args, RetrieverTrainConfig)
    assert values["mask_answer_negatives"] is False and values["pool_validation"] is False
    assert values["progress"] is False and values["val_files"] == ["a.jsonl"] and values["early_stop"] == 3
    assert config_overrides(_commands()["ask"].parse_args(["q", "--no-linker", "--reader", "r"])) == {
        "index": None,
        "retrieval.retriever": None,
        "retrieval.k": None,
        "reader.model": "r",
        "reader.focus_words": None,
        "reader.whole_passages": None,
        "reader.early_stop_passages": None,
        "reader.early_stop_probability": None,
        "linker.enabled": False,
        "retrieval.entity_bonus": None,
        "precision": None,
        "runtime": None,
        "device": None,
    }


def test_focus_words_flag_reaches_the_reader_config(tmp_path):
    config_file = tmp_path / "odqa.toml"
    config_file.write_text("[reader]\nfocus_words = 40\n")
    ask = _commands()["ask"]
    assert OdqaConfig.load(config_file, config_overrides(ask.parse_args(["q"]))).reader.focus_words == 40
    given = ask.parse_args(["q", "--focus-words", "0", "--config", str(config_file)])
    assert OdqaConfig.load(config_file, config_overrides(given)).reader.focus_words == 0
    given = ask.parse_args(["q", "--whole-passages", "2", "--config", str(config_file)])
    assert OdqaConfig.load(config_file, config_overrides(given)).reader.whole_passages == 2
    given = ask.parse_args(["q", "--early-stop-passages", "0", "--early-stop-probability", "0.5"])
    reader = OdqaConfig.load(None, config_overrides(given)).reader
    assert (reader.early_stop_passages, reader.early_stop_probability) == (0, 0.5)


@pytest.mark.subprocess
def test_building_the_command_line_loads_no_torch():
    # the training configs live apart from the training code so that `--help` and every command start fast
    code = (
        "import sys; from odqa.cli import build_parser; build_parser(); "
        "print(sorted(m for m in ('torch', 'transformers', 'datasets') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
