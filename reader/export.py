"""Export a trained checkpoint as a shippable reader: fp16 safetensors, tokenizer, reader_config.json, and a model
card (README.md): the destination's own card and its chosen answer bound are kept; where it has no card, a skeleton
is written from the checkpoint's train_info.json (the training command, data and steps), its scores left for
`eval-reader` to fill.

    python -m odqa.reader.export runs/reader-squad2/final models/reader
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import sys
from pathlib import Path

from odqa.core.atomic import atomic_folder
from odqa.core.model_files import checked_values, read_model_json

CARD = "README.md"
TRAIN_INFO = "train_info.json"


def export(src: str, dst: str, max_length: int = 256, stride: int = 96) -> Path:
    from odqa.reader.model import READER_CONFIG, Reader
    from odqa.reader.settings import CHECKPOINT_OWN_SETTINGS, ReaderSettings, load_reader_config

    reader = Reader.from_pretrained(src, device="cpu", max_length=max_length, stride=stride)
    info = train_info(src)
    if reader.settings.languages is None:  # what it was trained on is what it reads
        reader.settings.languages = checked_values(
            Path(src) / TRAIN_INFO, {"languages": info.get("languages") or None}, ReaderSettings
        )["languages"]
    out = Path(dst)
    # the bounds chosen for the destination on its dev sets (reader.settings.CHECKPOINT_OWN_SETTINGS) are kept, as
    # its card is: a retrained checkpoint records only defaults
    if (out / READER_CONFIG).is_file():
        chosen = load_reader_config(out / READER_CONFIG)
        for key in CHECKPOINT_OWN_SETTINGS:
            if key in chosen:
                setattr(reader.settings, key, chosen[key])
    with atomic_folder(out) as tmp:
        reader.save_pretrained(tmp, fp16=True)
        keep = out / CARD
        if keep.exists():
            shutil.copy(keep, tmp / CARD)
        else:
            (tmp / CARD).write_text(card_skeleton(src, dst, max_length, stride, info), encoding="utf-8")
    return out


def train_info(src: str) -> dict:
    """The checkpoint's train_info.json ({} where it has none)."""
    info_file = Path(src) / TRAIN_INFO
    return read_model_json(info_file) if info_file.is_file() else {}


def train_command(config: dict) -> str:
    """The `train-reader` command line of a training config (train_info.json's), its non-default settings only."""
    from odqa.reader.training.train_config import TrainConfig

    defaults = TrainConfig(train_files=[], output_dir="")
    words = [
        "python run_qa.py train-reader --train",
        *config.get("train_files", []),
        "--output",
        config.get("output_dir", "OUT"),
    ]
    for f in sorted(dataclasses.fields(TrainConfig), key=lambda f: f.kw_only is True):  # the run options last
        if f.name in ("train_files", "output_dir", "device") or f.name not in config:
            continue
        value = config[f.name]
        if value == getattr(defaults, f.name):
            continue
        flag = "--" + f.name.replace("_", "-")
        words.append(flag if value is True else "--no-" + flag[2:] if value is False else f"{flag} {value}")
    return " ".join(words)


def card_skeleton(src: str, dst: str, max_length: int, stride: int, info: dict) -> str:
    """The model card of an export without one; `info`: the checkpoint's train_info.json ({}: none)."""
    config = info.get("config", {})
    lines = [
        f"# odqa reader: {Path(dst).name}",
        "",
        "Extractive reader (`*ForQuestionAnswering`), fp16 safetensors, "
        f"read in windows of {max_length} tokens (stride {stride}).",
        "",
        "## Made by",
        "```bash",
    ]
    if config:
        lines.append(train_command(config))
    lines += [f"python -m odqa.reader.export {src} {dst} --max-length {max_length} --stride {stride}", "```", ""]
    if info:
        lines += [
            "## Training",
            f"Started from `{config.get('init', '?')}`; {info.get('questions', '?')} questions "
            f"({info.get('answerable', '?')} answerable, {info.get('unanswerable', '?')} unanswerable, "
            f"{info.get('skipped_bad_offset', 0)} skipped: answer not at its offset), "
            f"{info.get('windows', '?')} windows, {info.get('steps', '?')} steps of batch "
            f"{config.get('batch_size', '?')} (CPU) / {config.get('gpu_batch_size', '?')} (GPU), "
            f"lr {config.get('lr', '?')}, {info.get('precision', '?')} on {info.get('device', '?')}.",
            "",
        ]
    else:
        lines += ["## Training", f"(no {TRAIN_INFO} in {src}: describe the data, steps and hardware)", ""]
    lines += [
        "## Scores",
        "Not measured yet: `python run_qa.py eval-reader --data DEV --model "
        f"{dst} --json` on each dev set (the metric follows the data's language), then replace this line.",
        "",
    ]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--max-length", type=int, default=256)
    ap.add_argument("--stride", type=int, default=96)
    args = ap.parse_args(argv)
    out = export(args.src, args.dst, args.max_length, args.stride)
    size = sum(p.stat().st_size for p in out.iterdir()) / 2**20
    print(f"exported {args.src} -> {out} ({size:.1f} MiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
