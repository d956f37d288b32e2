"""Export a trained checkpoint as a shippable reader: fp16 safetensors, tokenizer, reader_config.json.

    python -m reader.export runs/reader-squad2/final models/reader
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from odqa.core.atomic import atomic_folder


def export(src: str, dst: str, max_length: int = 256, stride: int = 96) -> Path:
    from reader.model import Reader

    reader = Reader.from_pretrained(src, device="cpu", max_length=max_length, stride=stride)
    out = Path(dst)
    with atomic_folder(out) as tmp:
        reader.save_pretrained(tmp, fp16=True)
        keep = out / "README.md"
        if keep.exists():
            shutil.copy(keep, tmp / "README.md")
    return out


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
