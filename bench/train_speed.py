#!/usr/bin/env python3
"""Reader training speed of candidate recipes on the CPU at hand: windows per second of real training steps, before
any long run is chosen (a recipe's full run should fit the time the machine gives it).

    python bench/train_speed.py                                  # the multilingual candidates, 6 steps each
    python bench/train_speed.py --recipes "12 layers, 256=--max-length 256" "6 layers=--keep-layers 0,2,4,6,8,10"

Each recipe runs `reader.training.train.train` from --init on the same sample of the training files (`--limit`
questions of each), batch --batch-size, 2 threads; the first step (allocation, warm-up) is left out of the timing. The
table gives windows/s and real (unpadded) tokens/s, and the hours one pass over --full-windows windows would take.
Give the run the cores to itself: other work on the machine changes the figures many times over.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DATA = ROOT.parent / "shared" / "data"
MULTILINGUAL = [
    "12 layers, 384 tokens=--max-length 384 --stride 128",
    "12 layers, 256 tokens=--max-length 256",
    "12 layers, 256 tokens, embeddings frozen=--max-length 256 --freeze-embeddings",
    "6 layers (0,2,..,10), 256 tokens=--max-length 256 --keep-layers 0,2,4,6,8,10",
    "6 layers (0,2,..,10), 256 tokens, embeddings frozen=--max-length "
    "256 --keep-layers 0,2,4,6,8,10 --freeze-embeddings",
]


def time_recipe(args: argparse.Namespace, flags: str) -> dict:
    import torch

    from odqa.reader.training.train import TrainConfig, train

    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--max-length", type=int, default=256)
    parser.add_argument("--stride", type=int, default=64)
    parser.add_argument("--keep-layers", default="")
    parser.add_argument("--freeze-embeddings", action="store_true")
    parser.add_argument("--precision", default="fp32")
    recipe = parser.parse_args(shlex.split(flags))
    torch.set_num_threads(args.threads)
    stamps: list[float] = []
    with tempfile.TemporaryDirectory() as out:
        cfg = TrainConfig(
            train_files=args.train,
            output_dir=out,
            init=args.init,
            batch_size=args.batch_size,
            max_steps=args.steps + 1,
            save_every=10**9,
            progress=False,
            limit=args.limit,
            max_length=recipe.max_length,
            stride=recipe.stride,
            keep_layers=recipe.keep_layers,
            freeze_embeddings=recipe.freeze_embeddings,
            precision=recipe.precision,
            threads=args.threads,
            seed=1,
        )
        train(cfg, on_step=lambda step, loss: stamps.append(time.perf_counter()))
        seconds = stamps[-1] - stamps[0]
        info = json.loads((Path(out) / "final" / "train_info.json").read_text())
    windows = args.steps * args.batch_size
    return {
        "windows_per_second": round(windows / seconds, 2),
        "seconds_per_step": round(seconds / args.steps, 2),
        "steps_timed": args.steps,
        "train_info_steps": info.get("steps"),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--init", default="encoder-multilingual")
    ap.add_argument(
        "--train",
        nargs="+",
        default=[
            str(DATA / "squad" / "train-v1.1.json"),
            str(DATA / "multilingual" / "drcd-dev.json"),
            str(DATA / "multilingual" / "cmrc2018-trial.json"),
        ],
    )
    ap.add_argument("--recipes", nargs="+", default=MULTILINGUAL, metavar="NAME=FLAGS")
    ap.add_argument("--limit", type=int, default=40, help="questions of each training file")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--steps", type=int, default=5, help="steps timed (one more runs first, untimed)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument(
        "--full-windows",
        type=int,
        default=120672,
        help="windows of the full training set at 256 tokens (bench/results/reader-multilingual-cpu.md)",
    )
    ap.add_argument("--out", help="Markdown table to write")
    args = ap.parse_args(argv)

    from odqa.core.device import cpu_model_and_flags

    model, flags = cpu_model_and_flags(["avx2", "avx512f", "avx512_bf16", "avx512_vnni", "amx_bf16", "amx_tile"])
    header = f"CPU: {model}; flags: {' '.join(flags) or 'none of avx2/avx512/amx'}; {args.threads} threads"
    print(header, flush=True)
    rows = []
    for spec in args.recipes:
        name, _, flags_text = spec.partition("=")
        result = time_recipe(args, flags_text)
        hours = args.full_windows / result["windows_per_second"] / 3600
        rows.append(
            f"| {name} | `{flags_text}` | {result['windows_per_second']} | {result['seconds_per_step']} | {hours:.1f} |"
        )
        print(rows[-1], flush=True)
    table = "\n".join(
        [
            header,
            "",
            f"init `{args.init}`, batch {args.batch_size}, {args.steps} steps timed after one "
            "untimed (fp32 unless the flags say --precision)",
            "",
            f"| recipe | flags | windows/s | s/step | hours per pass over {args.full_windows:,} windows |",
            "|---|---|---:|---:|---:|",
            *rows,
        ]
    )
    print(table)
    if args.out:
        Path(args.out).write_text(table + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
