import pytest

from odqa.core.answers import answered_questions, exact_match, f1_score, has_answer, normalize_answer, regex_match
from odqa.core.errors import DataFormatError
from odqa.core.types import Passage, SearchHit
from odqa.corpus.questions import QAItem, load_questions
from odqa.eval.retrieval import judge, summarize


def test_has_answer_token_match_and_near_misses():
    text = "Wilhelm Conrad Röntgen won the first Nobel Prize in Physics in 1901."
    assert has_answer(text, ["Wilhelm Conrad Röntgen"])
    assert has_answer(text, ["WILHELM conrad röntgen"])  # uncased
    assert has_answer(text, ["1901"])
    assert not has_answer(text, ["190"])  # a near miss: part of a token is not a match
    assert not has_answer(text, ["Nobel Prize in Chemistry"])
    assert not has_answer("Obamacare passed.", ["Obama"])
    assert has_answer("It was 1,000 km.", ["1,000 km"])
    assert not has_answer("text", [""])


def test_answered_questions_agrees_with_has_answer_over_a_corpus():
    texts = ["Wilhelm Conrad Röntgen won in 1901.", "Obamacare passed.", "It was 1,000 km away."]
    answer_lists = [["röntgen"], ["Obama"], ["190", "1,000 KM"], ["Nobel"], [""]]
    expected = {i for i, answers in enumerate(answer_lists) if any(has_answer(t, answers) for t in texts)}
    assert answered_questions(texts, answer_lists) == expected == {0, 2}


def test_has_answer_regex():
    assert has_answer("Fashion week is in September.", ["Sept?(ember)?|Feb(ruary)?"], regex_answers=True)
    assert not has_answer("Fashion week is in May.", ["Sept?(ember)?|Feb(ruary)?"], regex_answers=True)
    with pytest.raises(DataFormatError, match="unclosed"):  # a broken regex is an error, never a silent miss
        has_answer("anything", ["(unclosed"], regex_answers=True)


def test_squad_normalisation_em_f1_by_hand():
    assert normalize_answer("The  Denver Broncos!") == "denver broncos"
    assert exact_match("the Denver Broncos", "Denver Broncos") == 1.0
    # prediction "denver broncos team" vs truth "denver broncos": P=2/3, R=1, F1=0.8
    assert f1_score("Denver Broncos team", "Denver Broncos") == pytest.approx(0.8)
    assert f1_score("Carolina", "Denver Broncos") == 0.0
    assert regex_match("September", ["Sept?(ember)?"]) == 1.0


def _hit(row, text):
    return SearchHit(row=row, score=1.0 / (row + 1), passage=Passage(str(row), "t", text))


def test_recall_and_mrr_by_hand():
    q1 = QAItem("1", "q1", ["Paris"])
    q2 = QAItem("2", "q2", ["Everest"])
    q3 = QAItem("3", "q3", ["Amazon"])
    r1 = judge(q1, [_hit(0, "Paris is a city"), _hit(1, "x")])  # rank 1
    r2 = judge(q2, [_hit(0, "x"), _hit(1, "y"), _hit(2, "Mount Everest")])  # rank 3
    r3 = judge(q3, [_hit(0, "Amazonia"), _hit(1, "z")])  # near miss only: no hit
    m = summarize([r1, r2, r3], ks=[1, 2, 3])
    assert m["recall@1"] == pytest.approx(33.33)
    assert m["recall@2"] == pytest.approx(33.33)
    assert m["recall@3"] == pytest.approx(66.67)
    assert m["mrr"] == pytest.approx(round(100 * (1 + 1 / 3) / 3, 2))  # in percent, as the recalls
    assert m["questions"] == 3


def test_gold_passage_recall():
    item = QAItem("1", "q", ["Denver"], context="Denver won. The game was in Santa Clara.")
    result = judge(item, [_hit(0, "Denver is a city"), _hit(1, "The game was in Santa Clara.")])
    assert result.first_hit_rank == 1 and result.first_gold_rank == 2
    m = summarize([result], ks=[1, 2])
    assert m["gold_recall@1"] == 0.0 and m["gold_recall@2"] == 100.0


def test_question_formats(tmp_path):
    (tmp_path / "a.qa.tsv").write_text("who is x\t['X', 'Y']\n")
    (tmp_path / "b.jsonl").write_text('{"question": "q?", "answer": ["a"]}\n')
    (tmp_path / "trec.tsv").write_text("7\tfactoid\tWhen?\tSept?(ember)?\n")
    (tmp_path / "wq.json").write_text('[{"qId": "w1", "qText": "what?", "answers": ["A"]}]')
    assert load_questions(tmp_path / "a.qa.tsv")[0].answers == ["X", "Y"]
    assert load_questions(tmp_path / "b.jsonl")[0].question == "q?"
    trec = load_questions(tmp_path / "trec.tsv")[0]
    assert trec.regex and trec.answers == ["Sept?(ember)?"]
    assert load_questions(tmp_path / "wq.json")[0].id == "w1"


def test_bad_question_files(tmp_path):
    with pytest.raises(DataFormatError, match="not found"):
        load_questions(tmp_path / "missing.tsv")
    (tmp_path / "q.xml").write_text("<q/>")
    with pytest.raises(DataFormatError, match="unknown question format"):
        load_questions(tmp_path / "q.xml")
    (tmp_path / "bad.tsv").write_text("q\t['an unclosed list\n")  # "q<TAB>text" is a Pyserini topic
    with pytest.raises(DataFormatError, match="bad.tsv:1"):
        load_questions(tmp_path / "bad.tsv")


def test_real_question_sets_load(shared_data):
    assert len(load_questions(shared_data / "dpr-qas" / "nq-test.qa.tsv")) == 3610
    assert len(load_questions(shared_data / "squad" / "dev-v1.1.json")) == 10570
    assert len(load_questions(shared_data / "curatedtrec" / "curated-train.tsv")) == 430
    assert len(load_questions(shared_data / "webquestions" / "devtest.json")) == 189
    assert len(load_questions(shared_data / "dpr-qas" / "trivia-dev.qa.tsv")) == 8837


def test_trec_regex_em_matches_at_the_start_as_drqa_does():
    # DrQA/ORQA: re.match(pattern, prediction) — a prefix match, not the whole prediction
    assert regex_match("September 1987", ["Sept?(ember)?"]) == 1.0
    assert regex_match("in September", ["Sept?(ember)?"]) == 0.0
