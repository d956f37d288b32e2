import pytest

from odqa.core.fusion import minmax_fuse, rrf_fuse
from odqa.core.types import Passage, SearchHit


def hits(*pairs):
    return [SearchHit(row=r, score=s, passage=Passage(str(r), "", "")) for r, s in pairs]


def test_minmax_by_hand():
    dense = hits((1, 0.9), (2, 0.5), (3, 0.1))  # normalised 1.0, 0.5, 0.0
    sparse = hits((3, 30.0), (4, 20.0), (1, 10.0))  # normalised 1.0, 0.5, 0.0
    fused = minmax_fuse([dense, sparse], [0.6, 0.4], k=4)
    got = {h.row: round(h.score, 6) for h in fused}
    assert got == {1: 0.6, 2: 0.3, 3: 0.4, 4: 0.2}
    assert [h.row for h in fused] == [1, 3, 2, 4]
    assert all(h.source == "hybrid" and h.passage is not None for h in fused)


def test_minmax_alpha_extremes_follow_one_list():
    dense = hits((1, 0.9), (2, 0.5))
    sparse = hits((2, 9.0), (1, 1.0))
    assert [h.row for h in minmax_fuse([dense, sparse], [1.0, 0.0], 2)] == [1, 2]
    assert [h.row for h in minmax_fuse([dense, sparse], [0.0, 1.0], 2)] == [2, 1]


def test_rrf_by_hand():
    a = hits((1, 5), (2, 4))
    b = hits((2, 9), (3, 8))
    fused = rrf_fuse([a, b], k=3, rrf_k=60)
    scores = {h.row: h.score for h in fused}
    assert scores[2] == pytest.approx(1 / 62 + 1 / 61)
    assert scores[1] == pytest.approx(1 / 61)
    assert scores[3] == pytest.approx(1 / 62)
    assert [h.row for h in fused] == [2, 1, 3]


def test_fusion_of_empty_lists_and_k_cut():
    assert rrf_fuse([[], []], k=5, rrf_k=60) == []
    assert len(minmax_fuse([hits((1, 1.0), (2, 0.5), (3, 0.2)), []], [0.5, 0.5], k=2)) == 2


def test_auto_fusion_resolves_from_record_then_language():
    from odqa.core.fusion import resolve_fusion

    assert resolve_fusion("auto", 0.5, 60) == ("rrf", 0.5, 60)
    assert resolve_fusion("auto", 0.4, 60, language="ko") == ("minmax", 0.4, 60)
    assert resolve_fusion("auto", 0.5, 60, language="zh") == ("minmax", 0.5, 60)
    tuned = {"method": "minmax", "alpha": 0.8, "rrf_k": 60}
    assert resolve_fusion("auto", 0.5, 60, tuned=tuned, language="zh") == ("minmax", 0.8, 60)
    assert resolve_fusion("auto", 0.5, 60, tuned={"method": "rrf", "rrf_k": 10}) == ("rrf", 0.5, 10)
    assert resolve_fusion("rrf", 0.5, 60, tuned=tuned, language="ko") == ("rrf", 0.5, 60)  # named: as given
    assert resolve_fusion("auto", 0.5, 60, tuned={"method": "bogus"}, language="en") == ("rrf", 0.5, 60)


def test_every_fused_score_says_which_fusion_made_it(tmp_path):
    """RRF scores (about 0.03 at the top) and min-max ones (0 to 1) share no scale: each fused hit names its fusion,
    and so does every place a score is shown (the shell and `search`'s label, the JSON's `fusion`; issue 77)."""
    from odqa.core.fusion import Fusion, entity_bonus_fuse, score_label
    from odqa.pipeline import Result

    a, b = hits((1, 5.0), (2, 4.0)), hits((2, 9.0), (3, 8.0))
    assert {h.fusion for h in rrf_fuse([a, b], k=3, rrf_k=60)} == {"rrf"}
    assert {h.fusion for h in Fusion.hybrid("minmax", 0.5, 60)([a, b], 3)} == {"minmax"}
    assert {h.fusion for h in entity_bonus_fuse(a, hits((3, 1.0)), 0.5, 3)} == {"minmax+entity"}
    assert [h.fusion for h in a] == ["", ""]  # a retriever's own score
    rrf = rrf_fuse([a, b], k=1, rrf_k=60)[0]
    assert score_label(rrf) == f"{rrf.score:.3f} rrf" and score_label(a[0]) == "5.000"
    shown = Result("q", [], [rrf, a[0]]).to_dict()["passages"]
    assert [(p["source"], p["fusion"]) for p in shown] == [("hybrid", "rrf"), ("", "")]
