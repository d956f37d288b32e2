"""Question files in TriviaQA's JSON, BEIR's queries.jsonl, plain text and answer-less JSONL, and qrels in
BEIR's TSV and TREC's format."""

import json

import pytest

from odqa.core.errors import DataFormatError
from odqa.corpus.questions import load_qrels, load_questions, with_answers

TRIVIA = {
    "Data": [
        {
            "Answer": {
                "Aliases": ["Helicopter", "Copter"],
                "NormalizedAliases": ["helicopter", "copter"],
                "Value": "Helicopter",
            },
            "Question": "The VS-300 was a type of what?",
            "QuestionId": "tc_1",
        },
        {
            "Answer": {"NormalizedAliases": ["bh"], "Value": "BH"},
            "Question": "Registration letters of Belize?",
            "QuestionId": "tc_2",
        },
        {"Question": "A test-set question without its answer?", "QuestionId": "tc_3"},
    ],
    "Domain": "Web",
    "Version": 1.0,
}


def test_triviaqa_json(tmp_path):
    path = tmp_path / "unfiltered-web-dev.json"
    path.write_text(json.dumps(TRIVIA))
    items = load_questions(path)
    assert [(i.id, i.question, i.answers) for i in items] == [
        ("tc_1", "The VS-300 was a type of what?", ["Helicopter", "Copter"]),
        ("tc_2", "Registration letters of Belize?", ["bh"]),
        ("tc_3", "A test-set question without its answer?", []),
    ]
    assert [i.id for i in with_answers(items, path)] == ["tc_1", "tc_2"]


def test_beir_queries_text_lines_and_answerless_jsonl(tmp_path):
    beir = tmp_path / "queries.jsonl"
    beir.write_text('{"_id": "q7", "text": "what is penicillin", "metadata": {}}\n')
    assert [(i.id, i.question, i.answers) for i in load_questions(beir)] == [("q7", "what is penicillin", [])]
    text = tmp_path / "questions.txt"
    text.write_text("Who wrote Hamlet?\n\nWho painted the Mona Lisa?\n")
    assert [(i.id, i.question) for i in load_questions(text)] == [
        ("0", "Who wrote Hamlet?"),
        ("2", "Who painted the Mona Lisa?"),
    ]
    plain = tmp_path / "q.jsonl"
    plain.write_text('{"id": "a", "question": "Who wrote Hamlet?"}\n{"question": "x", "answer": 5}\n')
    with pytest.raises(DataFormatError, match=r"q.jsonl:2: answers must be a string or a list of strings"):
        load_questions(plain)
    assert load_questions(plain, limit=1)[0].answers == []


def test_qrels_beir_tsv_and_trec(tmp_path):
    beir = tmp_path / "test.tsv"
    beir.write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\t2\nq2\td3\t1\n")
    trec = tmp_path / "qrels.txt"
    trec.write_text("q1 0 d1 1\nq1 0 d2 2\nq2 0 d3 1\n")
    expected = {"q1": {"d1": 1, "d2": 2}, "q2": {"d3": 1}}
    assert load_qrels(beir) == expected and load_qrels(trec) == expected
    (tmp_path / "bad.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\n")
    with pytest.raises(DataFormatError, match=r"bad.tsv:2: a qrels line is"):
        load_qrels(tmp_path / "bad.tsv")


def test_pyserini_topics_keep_their_qids_in_tsv_and_txt(tmp_path):
    """Pyserini's topics (`qid<TAB>query`, no answers) read as questions under their own ids, from .tsv and from
    the .txt its topic files are named by; a DPR qas file (second column a list) stays DPR qas (issue 77)."""
    for name in ("topics.dl19-passage.txt", "queries.dev.small.tsv"):
        topics = tmp_path / name
        topics.write_text("1048585\twhat is paula deen's brother\n\n19335\tanthropological definition of environment\n")
        items = load_questions(topics)
        assert [(i.id, i.question, i.answers) for i in items] == [
            ("1048585", "what is paula deen's brother", []),
            ("19335", "anthropological definition of environment", []),
        ]
        topics.write_text("1048585\twhat is paula deen's brother\nno tab here\n")
        with pytest.raises(DataFormatError, match=rf"{name}:2: a topics line is qid<TAB>query"):
            load_questions(topics)
    qas = tmp_path / "nq.qa.tsv"
    qas.write_text("who wrote hamlet\t['Shakespeare']\nwho painted it\tnot a list\n")
    assert load_questions(qas, limit=1)[0].answers == ["Shakespeare"]
    with pytest.raises(DataFormatError, match=r"nq.qa.tsv:2: second column must be a Python list of answers"):
        load_questions(qas)


def test_jsonl_questions_keep_the_ids_the_file_gives(tmp_path):
    """`predict` and the runs carry a file's own question ids (qid, _id, question_id...), not line numbers."""
    path = tmp_path / "q.jsonl"
    path.write_text(
        '{"qid": "q-17", "question": "Who wrote Hamlet?"}\n{"question_id": 42, "question": "Who painted it?"}\n'
        '{"question": "No id here?"}\n'
    )
    assert [i.id for i in load_questions(path)] == ["q-17", "42", "2"]
