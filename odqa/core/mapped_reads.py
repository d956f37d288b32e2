"""How a memory map will be read, told to the kernel: rows a few at a time at random places (an index answering
questions) need no readahead around a page-cache miss, which reads up to the device's read_ahead_kb (8 MiB a miss
on the machine of bench/results/scale.md), and scattered ranges asked for at once are read in parallel instead of
faulting in one after another."""

from __future__ import annotations

import mmap
from collections.abc import Iterable


def advise_random(mapping: mmap.mmap | None) -> bool:
    """MADV_RANDOM on `mapping` where the platform has it; whether it was given."""
    if mapping is None or not hasattr(mapping, "madvise") or not hasattr(mmap, "MADV_RANDOM"):
        return False
    mapping.madvise(mmap.MADV_RANDOM)
    return True


def prefetch_ranges(mapping: mmap.mmap | None, starts: Iterable[int], ends: Iterable[int]) -> None:
    """Ask the disk for the pages of every [start, end) of `mapping` (offsets within the map) at once."""
    if mapping is None or not hasattr(mapping, "madvise") or not hasattr(mmap, "MADV_WILLNEED"):
        return
    for start, end in zip(starts, ends):
        page = int(start) // mmap.PAGESIZE * mmap.PAGESIZE
        mapping.madvise(mmap.MADV_WILLNEED, page, int(end) - page)
