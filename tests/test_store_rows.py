"""Rows read from a passage store of many record batches come back as asked: in the order given, repeated
where repeated, each the passage at that row (`get_rows` slices the memory map instead of `Table.take`)."""

import pytest

from odqa.core.types import Passage
from odqa.corpus.store import PassageStore


def test_get_rows_across_record_batches(tmp_path):
    passages = [
        Passage(id=f"p{i}", title=f"T{i // 4}", text=f"text {i}", doc_id=f"d{i // 4}", start=i, end=i + 5)
        for i in range(20)
    ]
    store, _ = PassageStore.write(passages, tmp_path / "store", batch_rows=3)
    assert store.table.column("id").num_chunks == 7
    wanted = [17, 2, 17, 0, 19, 9]
    assert store.get_rows(wanted) == [passages[i] for i in wanted]
    assert store.get(5) == passages[5] and store.get_rows([]) == []
    with pytest.raises(IndexError, match="out of range"):
        store.get_rows([3, 20])


def test_a_store_opened_for_random_reads_reads_rows_and_streams_alike(tmp_path):
    """An index's store is advised for random reads (no readahead around a miss); its rows, a checked read of
    scattered blocks (prefetched together) and a whole stream read the same, and the advice outlives a stream."""
    from odqa.corpus.store import DATA_FILE
    from odqa.indexes.integrity import FileCheck, describe_file

    passages = [
        Passage(id=f"p{i}", title=f"T{i}", text=f"text {i} " * 50, doc_id=f"d{i}", start=0, end=5) for i in range(300)
    ]
    PassageStore.write(passages, tmp_path / "store", batch_rows=7)
    store = PassageStore.open(tmp_path / "store")
    store.advise_random_reads()
    record = describe_file(tmp_path / "store" / DATA_FILE)
    store.verify_with(FileCheck(record, store.byte_reader(), DATA_FILE, "rebuild it", folder=tmp_path / "store"))
    wanted = [299, 0, 150, 7]
    assert store.get_rows(wanted) == [passages[i] for i in wanted]
    streamed = [t for batch in store.iter_batches(50, columns=("text",)) for t in batch["text"]]
    assert streamed == [p.text for p in passages] and store._random
    assert store.get_rows([42]) == [passages[42]]
