"""Rows read from a passage store of many record batches come back as asked: in the order given, repeated
where repeated, each the passage at that row (`get_rows` slices the memory map instead of `Table.take`)."""

import pytest

from odqa.core.types import Passage
from odqa.corpus.store import PassageStore


def test_get_rows_across_record_batches(tmp_path):
    passages = [Passage(id=f"p{i}", title=f"T{i // 4}", text=f"text {i}", doc_id=f"d{i // 4}", start=i, end=i + 5)
                for i in range(20)]
    store, _ = PassageStore.write(passages, tmp_path / "store", batch_rows=3)
    assert store.table.column("id").num_chunks == 7
    wanted = [17, 2, 17, 0, 19, 9]
    assert store.get_rows(wanted) == [passages[i] for i in wanted]
    assert store.get(5) == passages[5] and store.get_rows([]) == []
    with pytest.raises(IndexError, match="out of range"):
        store.get_rows([3, 20])
