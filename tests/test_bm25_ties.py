"""BM25's top k with ties at the cut (indexes.bm25.rank_with_ties): equal scores ordered by row, a tie across the
cut fetched whole, and no second engine call when nothing ties across it."""

from __future__ import annotations

from odqa.indexes.bm25 import rank_with_ties


def _engine(scores: list[float]):
    """A fetch(n) over these row scores, best first (row order among equals reversed, as an engine may return
    them), recording each n asked for."""
    asked = []
    ranked = sorted(enumerate(scores), key=lambda h: (-h[1], -h[0]))

    def fetch(n: int):
        asked.append(n)
        return ranked[:n]

    return fetch, asked


def test_one_engine_call_when_nothing_ties_across_the_cut():
    fetch, asked = _engine([float(s) for s in range(50)])
    top = rank_with_ties(fetch, 10)
    assert [row for row, _ in top] == list(range(49, 39, -1))
    assert asked == [81]


def test_a_tie_across_the_cut_is_fetched_whole_and_ordered_by_row():
    scores = [5.0, 4.0] + [3.0] * 60 + [1.0] * 5
    fetch, asked = _engine(scores)
    top = rank_with_ties(fetch, 5)
    assert top == [(0, 5.0), (1, 4.0), (2, 3.0), (3, 3.0), (4, 3.0)]  # the lowest rows of the tie, whatever order
    assert asked == [41, 328]  # each fetch is a whole search: few of them, each asking for many more hits


def test_fewer_hits_than_asked_end_the_search():
    fetch, asked = _engine([2.0, 2.0, 1.0])
    assert rank_with_ties(fetch, 3) == [(0, 2.0), (1, 2.0), (2, 1.0)]
    assert asked == [25]


def test_a_tie_shorter_than_the_first_fetch_costs_no_second_search():
    scores = [5.0, 4.0] + [3.0] * 20 + [1.0] * 30
    fetch, asked = _engine(scores)
    assert rank_with_ties(fetch, 5) == [(0, 5.0), (1, 4.0), (2, 3.0), (3, 3.0), (4, 3.0)]
    assert asked == [41]
