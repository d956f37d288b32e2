#!/usr/bin/env python3
"""Run a command as it would run on an AVX2-only CPU, on a machine with AVX-512 (an approximation).

Issue #23's targets are for CPUs with AVX2 and no AVX-512. On an AVX-512 machine this hides the wider units from
the three places that choose kernels:
* odqa's `auto` plan reads /proc/cpuinfo: the command sees a copy without the avx512*/amx*/avx_vnni flags
  (bind-mounted in a private mount namespace: needs root and `unshare`);
* ONNX Runtime's MLAS checks XCR0 (xgetbv) before any AVX-512 kernel: a copy of the package whose xgetbv
  instructions read x87|SSE|AVX (`mov al, 7` in their place; found with binutils' objdump) goes first on
  PYTHONPATH, so MLAS takes its AVX2 kernels (int8 products with vpmaddubsw, no VNNI);
* torch, oneDNN, MKL and FAISS are capped at AVX2 by their own environment variables.

What it cannot hide is the core itself: clocks, caches and the AVX2 throughput of the machine at hand. Compare
variants of one run (ratios), and say the figures were emulated. Calibrated against a real AVX2 EPYC in
bench/results/speed-avx2.md ("AVX2 emulated").

    python bench/emulate_avx2.py -- python bench/speed.py --quick --json --variants torch-fp32-whole,auto ...
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import NoReturn

HIDDEN_FLAG = re.compile(r"^(avx512.*|amx.*|avx_vnni.*|avx_ifma)$")
XGETBV = b"\x0f\x01\xd0"
XCR0_AVX = b"\xb0\x07\x90"  # mov al, 7 (x87 | SSE | AVX state); nop
CAPS = {
    "ATEN_CPU_CAPABILITY": "avx2",
    "ONEDNN_MAX_CPU_ISA": "AVX2",
    "DNNL_MAX_CPU_ISA": "AVX2",
    "MKL_ENABLE_INSTRUCTIONS": "AVX2",
    "FAISS_OPT_LEVEL": "avx2",
}


def fail(message: str) -> NoReturn:
    print(f"emulate_avx2: error: {message}", file=sys.stderr)
    sys.exit(2)


def avx2_cpuinfo(text: str) -> str:
    """/proc/cpuinfo with the flags of AVX-512, AMX and AVX-VNNI removed."""
    lines = []
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() == "flags":
            line = f"{key}: " + " ".join(f for f in value.split() if not HIDDEN_FLAG.match(f))
        lines.append(line)
    return "\n".join(lines) + "\n"


def xgetbv_offsets(library: Path) -> list[int]:
    """File offsets of every xgetbv instruction in the library's .text (objdump's disassembly)."""
    if not shutil.which("objdump"):
        fail("objdump not found; install binutils (apt install binutils)")
    headers = subprocess.run(["objdump", "-h", str(library)], capture_output=True, text=True, check=True).stdout
    text = next((line.split() for line in headers.splitlines() if line.split()[1:2] == [".text"]), None)
    if text is None:
        fail(f"{library} has no .text section")
    vma, file_offset = int(text[3], 16), int(text[5], 16)
    listing = subprocess.run(
        ["objdump", "-d", "-j", ".text", "--no-show-raw-insn", str(library)], capture_output=True, text=True, check=True
    ).stdout
    return [int(m.group(1), 16) - vma + file_offset for m in re.finditer(r"^\s*([0-9a-f]+):\s+xgetbv\b", listing, re.M)]


def patched_onnxruntime(cache: Path) -> Path:
    """A copy of the installed onnxruntime package whose xgetbv reports no AVX-512 state (made once per
    installed build); returns the folder to put first on PYTHONPATH."""
    import onnxruntime

    source = Path(onnxruntime.__file__).parent
    library = next(source.glob("capi/onnxruntime_pybind11_state*.so"), None)
    if library is None:
        fail(f"no onnxruntime_pybind11_state library under {source / 'capi'}")
    stamp = f"{onnxruntime.__version__}-{library.stat().st_size}-{int(library.stat().st_mtime)}"
    root = cache / f"onnxruntime-{stamp}"
    if (root / "PATCHED").exists():
        return root
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(source, root / "onnxruntime")
    target = root / "onnxruntime" / library.relative_to(source)
    data = bytearray(target.read_bytes())
    offsets = xgetbv_offsets(library)
    if not offsets or any(data[o : o + 3] != XGETBV for o in offsets):
        fail(f"could not locate onnxruntime's xgetbv instructions in {library}")
    for offset in offsets:
        data[offset : offset + 3] = XCR0_AVX
    target.write_bytes(bytes(data))
    (root / "PATCHED").write_text(f"{len(offsets)} xgetbv patched in {library.name}\n")
    return root


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--cache", default=str(Path(os.environ.get("ODQA_HOME", Path.home() / ".cache" / "odqa")) / "avx2-emulation")
    )
    ap.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command to run")
    args = ap.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        fail("give the command after --, e.g. -- python bench/speed.py --quick --json")
    if os.geteuid() != 0 or not shutil.which("unshare"):
        fail("needs root and unshare (util-linux) to show the command its own /proc/cpuinfo")
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    cpuinfo = cache / "cpuinfo"
    cpuinfo.write_text(avx2_cpuinfo(Path("/proc/cpuinfo").read_text()))
    ort = patched_onnxruntime(cache)
    env = {**os.environ, **CAPS, "PYTHONPATH": os.pathsep.join(filter(None, [str(ort), os.environ.get("PYTHONPATH")]))}
    shell = 'mount --bind "$0" /proc/cpuinfo && exec "$@"'
    return subprocess.call(["unshare", "-m", "sh", "-c", shell, str(cpuinfo), *command], env=env)


if __name__ == "__main__":
    sys.exit(main())
