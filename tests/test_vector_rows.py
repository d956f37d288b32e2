"""Rows read at random from a vector file (an ivfpq index rescoring its candidates, a knowledge base scoring its
own): the map is advised for random reads and each row's pages are asked for before reading, whatever the offset
of the vectors in the file; what is read is the rows themselves."""

from __future__ import annotations

import mmap

import numpy as np
import pytest

from odqa.indexes.vector import advise_random_rows, prefetch_rows


@pytest.mark.parametrize("offset", [128, mmap.ALLOCATIONGRANULARITY + 4096 + 96])
def test_prefetched_rows_read_back_whole_at_any_offset(tmp_path, offset):
    vectors = np.random.default_rng(0).normal(size=(5000, 384)).astype(np.float16)
    path = tmp_path / "v.bin"
    path.write_bytes(b"\0" * offset + vectors.tobytes())
    mapped = np.memmap(path, dtype=np.float16, mode="r", offset=offset, shape=vectors.shape)
    advise_random_rows(mapped)
    rows = np.array([0, 1, 2047, 4999])
    prefetch_rows(mapped, rows)
    assert np.array_equal(mapped[rows], vectors[rows])


def test_arrays_that_are_not_memory_maps_are_left_alone():
    vectors = np.ones((10, 4), dtype=np.float32)
    advise_random_rows(vectors)
    prefetch_rows(vectors, np.array([3]))
    assert vectors.sum() == 40
