"""End-to-end QA on the built-in demo corpus with the shipped models, the QA metric, and the commands."""

import json
import os
import subprocess
import sys

import pytest

from odqa.config import OdqaConfig
from odqa.core.errors import OdqaError
from odqa.core.types import Answer, Passage, SearchHit
from odqa.corpus.questions import QAItem, load_questions
from odqa.demo_corpus import DEMO_ARTICLES, DEMO_QUESTIONS, demo_index_path, demo_kb_path
from odqa.eval.qa import evaluate_qa, score_answer
from odqa.pipeline import Pipeline, Result, clean_question
from tests.conftest import REPO_ROOT


def test_score_answer_by_hand():
    item = QAItem("1", "q", ["Denver Broncos", "Broncos"])
    assert score_answer("the Broncos", item) == (1.0, 1.0)
    em, f1 = score_answer("Denver Broncos team", item)  # vs "denver broncos": P 2/3, R 1
    assert em == 0.0 and f1 == pytest.approx(0.8)
    assert score_answer("", item) == (0.0, 0.0)
    assert score_answer("September", QAItem("2", "q", ["Sept?(ember)?"], regex=True)) == (1.0, 1.0)
    assert score_answer("in September", QAItem("2", "q", ["Sept?(ember)?"], regex=True)) == (0.0, 0.0)


def test_korean_and_chinese_questions_are_scored_with_their_official_metrics():
    from odqa.eval.reader_eval import metric_for

    korean = QAItem("k", "한글을 창제한 사람은?", ["세종대왕"])
    chinese = QAItem("z", "长城有多长？", ["两万一千公里"])
    assert metric_for([korean]) == "korquad" and metric_for([chinese]) == "cmrc2018"
    # a particle on the span: no shared whitespace token, but the characters match (KorQuAD's character F1)
    assert score_answer("세종대왕이", korean) == (0.0, 0.0)
    em, f1 = score_answer("세종대왕이", korean, "korquad")
    assert em == 0.0 and f1 == pytest.approx(2 * 0.8 / 1.8)
    assert score_answer("两万一千公里", chinese, "cmrc2018") == (1.0, 1.0)


class FixedAnswers:
    """A pipeline double that returns given answers, to check the metric arithmetic of evaluate_qa."""

    def __init__(self, predictions):
        self.predictions = predictions

    def ask_batch(self, questions, k=None):
        out = []
        for q in questions:
            text, passage = self.predictions[q]
            answers = [Answer(text=text, score=1.0, probability=0.75, confident=True)] if text else []
            out.append(Result(q, answers, [SearchHit(0, 1.0, Passage("p", "t", passage))]))
        return out


def test_evaluate_qa_by_hand(tmp_path):
    items = [QAItem("1", "a?", ["Paris"]), QAItem("2", "b?", ["Mount Everest"]), QAItem("3", "c?", ["1889"])]
    pipeline = FixedAnswers(
        {"a?": ("Paris", "Paris is big"), "b?": ("Everest", "Mount Everest"), "c?": ("", "nothing")}
    )
    m = evaluate_qa(pipeline, items, ks=[1], progress=False, per_question=tmp_path / "rows.jsonl")
    rows = [json.loads(line) for line in (tmp_path / "rows.jsonl").read_text().splitlines()]
    assert [(r["prediction"], r["probability"], r["confident"]) for r in rows] == [
        ("Paris", 0.75, True),
        ("Everest", 0.75, True),
        ("", 0.0, False),
    ]
    # EM: 1, 0, 0 -> 33.33; F1: 1, 2*(1*0.5)/(1.5)=0.667, 0 -> 55.56; recall@1: 2 of 3
    assert m["em"] == pytest.approx(33.33) and m["f1"] == pytest.approx(55.56) and m["recall@1"] == pytest.approx(66.67)
    # reading apart from retrieval: 2 questions had the answer in a passage read, 1 of them answered exactly
    assert m["answer_in_read"] == pytest.approx(66.67) and m["em_given_answer_read"] == pytest.approx(50.0)


@pytest.mark.parametrize("question", ["", "   ", "?!...", "¿?"])
def test_empty_questions_are_rejected(question):
    with pytest.raises(OdqaError, match="empty"):
        clean_question(question)


def test_long_questions_are_truncated_with_a_notice():
    text, notices = clean_question("why " * 400)
    assert len(text) <= 500 and notices and "truncated" in notices[0]


@pytest.fixture(scope="module")
def pipeline():
    """The default pipeline on the demo corpus: shipped linker, retriever fusion and reader."""
    return Pipeline(OdqaConfig.load(None, {}), default_index=demo_index_path, default_kb=demo_kb_path)


def test_demo_questions_end_to_end(pipeline):
    items = load_questions(DEMO_QUESTIONS)
    assert len(items) == 100
    metrics = evaluate_qa(pipeline, items, ks=[1, 10], progress=False)
    assert metrics["recall@10"] >= 95.0
    assert metrics["em"] >= 70.0, metrics


def test_the_shipped_linker_links_demo_entities(pipeline):
    result = pipeline.ask("When did Alexander Fleming discover penicillin?")
    linked = {(m.text, m.entity.title if m.entity else None) for m in result.mentions}
    assert ("Alexander Fleming", "Alexander Fleming") in linked, linked
    assert "link" in result.timings


def test_answers_carry_their_passage_and_offsets(pipeline):
    result = pipeline.ask("Who discovered penicillin?")
    assert result.answers
    best = result.answers[0]
    assert best.context[best.start : best.end] == best.text
    assert best.passage_id in {h.passage.id for h in result.passages}
    assert set(result.timings) >= {"retrieve", "read", "total"}


def test_question_about_nothing_in_the_corpus_gives_best_passages(pipeline):
    result = pipeline.ask("xqzv wptl bnrk?")
    assert result.passages  # the best passages are still shown
    assert all(0.0 <= a.probability <= 1.0 for a in result.answers)
    if result.answers and not result.confident:  # a best guess is shown, and said to be one
        assert any("no confident answer" in n for n in result.notices)
        assert result.to_dict()["confident"] is False


def run(*args, stdin=None):
    return subprocess.run(
        [sys.executable, "run_qa.py", *args], cwd=REPO_ROOT, input=stdin, capture_output=True, text=True, timeout=600
    )


@pytest.mark.subprocess
def test_ask_json_contract():
    proc = run("ask", "--no-linker", "--json", "Who painted the Mona Lisa?")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    assert isinstance(data["answers"], list) and data["answers"]
    assert {"text", "score", "probability", "passage_id", "title", "start", "end"} <= set(data["answers"][0])


@pytest.mark.subprocess
def test_ask_bad_input_and_missing_index(tmp_path):
    proc = run("ask", "--no-linker", "  ?? ")
    assert proc.returncode == 2 and "empty" in proc.stderr and "Traceback" not in proc.stderr
    proc = run("ask", "--index", str(tmp_path / "none"), "who?")
    assert proc.returncode == 2 and "odqa index" in proc.stderr.strip().splitlines()[-1]
    bad = tmp_path / "bad.toml"
    bad.write_text("[retrieval]\nk = -3\n")
    proc = run("ask", "--config", str(bad), "who?")
    assert proc.returncode == 2 and "retrieval.k" in proc.stderr


@pytest.mark.subprocess
def test_shell_with_piped_stdin():
    script = (
        "Who discovered penicillin?\n:k 3\n:retriever bm25\n"
        "What is the capital of France?\n:passages\n:entities\n:explain\n...\n:bogus\n\n:help\n"
    )
    proc = run("shell", "--no-linker", stdin=script)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "k = 3" in out and "retriever = bm25" in out
    assert out.count(" 1. ") >= 2  # answers to both questions; :passages lists passage 1 too
    assert "  3. [" in out and "  4. [" not in out  # :passages shows exactly k=3 passages
    assert "question is empty" in out  # a bad question does not kill the shell
    assert "unknown command :bogus" in out and ":retriever bm25|dense|hybrid" in out


@pytest.mark.subprocess
def test_shell_in_a_terminal():
    pexpect = pytest.importorskip("pexpect")
    from odqa.demo_corpus import odqa_home

    history = odqa_home() / "shell_history"
    before = history.read_text().count("penicillin") if history.exists() else 0
    # CI terminals answer no cursor-position requests; without this prompt_toolkit waits for one at every prompt
    env = {**os.environ, "PROMPT_TOOLKIT_NO_CPR": "1"}
    child = pexpect.spawn(
        sys.executable,
        ["run_qa.py", "shell", "--no-linker"],
        cwd=str(REPO_ROOT),
        encoding="utf-8",
        timeout=300,
        env=env,
    )
    child.expect("odqa>")
    child.sendline("Who discovered penicillin?")
    child.expect("1\\. ")
    child.expect("odqa>")
    child.sendline(":k 2")
    child.expect("k = 2")
    # Ctrl-D only ends the shell once the next prompt has put the terminal in raw mode; sent earlier, the
    # cooked-mode line discipline swallows it and the shell waits forever
    child.expect("odqa>")
    child.sendcontrol("d")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    assert history.read_text().count("penicillin") == before + 1  # history kept across sessions


@pytest.mark.subprocess
def test_ask_json_answers_each_quoted_question_apart():
    proc = run("ask", "--no-linker", "--json", "Who discovered penicillin?", "Who painted the Mona Lisa?")
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in proc.stdout.strip().splitlines() if line.startswith("{")]
    assert [d["question"] for d in lines] == ["Who discovered penicillin?", "Who painted the Mona Lisa?"]
    assert all(d["answers"] for d in lines)


def test_unquoted_words_stay_one_question():
    from odqa.commands.qa import split_questions

    assert split_questions(["Who", "wrote", "Hamlet?"]) == ["Who wrote Hamlet?"]
    assert split_questions(["Who wrote Hamlet?", "Who painted it?"]) == ["Who wrote Hamlet?", "Who painted it?"]


def test_bare_exit_leaves_the_shell_and_blank_lines_stay_out_of_history(tmp_path):
    from odqa.config import OdqaConfig
    from odqa.pipeline import Pipeline
    from odqa.shell import Shell, question_history

    shell = Shell(Pipeline(OdqaConfig()))  # components load on first question; leaving asks none
    assert shell.handle("exit") is False and shell.handle("  QUIT ") is False
    history = question_history(str(tmp_path / "history"))
    for line in ["Who wrote Hamlet?", "", "   "]:
        history.append_string(line)
    assert list(question_history(str(tmp_path / "history")).load_history_strings()) == ["Who wrote Hamlet?"]


@pytest.mark.subprocess
def test_link_uses_the_knowledge_base_ask_uses(tmp_path):
    # from another folder, as its help example runs: no work_indexes/kb there, so the demo KB, as `ask`
    proc = subprocess.run(
        [sys.executable, str(REPO_ROOT / "run_qa.py"), "link", "--json", "Who discovered penicillin?"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Penicillin" in {m["title"] for m in json.loads(proc.stdout.strip().splitlines()[-1])["mentions"]}


def test_eval_qa_reads_k_passages(tmp_path):
    from odqa.config import OdqaConfig
    from odqa.corpus.questions import load_questions
    from odqa.demo_corpus import DEMO_QUESTIONS
    from odqa.eval.qa import evaluate_qa
    from odqa.pipeline import Pipeline

    class CountingPipeline(Pipeline):  # the real pipeline, noting how many passages each question got
        read = []

        def ask_batch(self, questions, k=None, retriever=None):
            results = super().ask_batch(questions, k=k, retriever=retriever)
            self.read += [len(r.passages) for r in results]
            return results

    pipeline = CountingPipeline(
        OdqaConfig.load(overrides={"retrieval.retriever": "bm25", "linker.enabled": False}),
        default_index=demo_index_path,
    )
    metrics = evaluate_qa(pipeline, load_questions(DEMO_QUESTIONS, limit=2), [1, 3], k=3, progress=False)
    assert pipeline.read == [3, 3] and "recall@3" in metrics


def test_predict_streams_one_json_line_per_question(tmp_path):
    questions = tmp_path / "questions.txt"
    questions.write_text("Who discovered penicillin?\n\nWho painted the Mona Lisa?\nWho wrote Hamlet?\n")
    proc = run("predict", str(questions), "--no-linker", "--retriever", "bm25", "--k", "3", "--batch-size", "2")
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in proc.stdout.splitlines()]  # nothing but JSON lines on stdout
    assert [(r["id"], r["question"]) for r in rows] == [
        ("0", "Who discovered penicillin?"),
        ("2", "Who painted the Mona Lisa?"),
        ("3", "Who wrote Hamlet?"),
    ]
    texts = [json.loads(line)["text"] for line in DEMO_ARTICLES.read_text(encoding="utf-8").splitlines()]
    assert all(r["answer"] and any(r["answer"] in text for text in texts) for r in rows)  # spans of the corpus
    assert all(
        len(r["passages"]) == 3 and 0.0 <= r["probability"] <= 1.0 and isinstance(r["confident"], bool) for r in rows
    )
    assert "predict" in proc.stderr  # the progress bar goes to stderr
    jsonl = tmp_path / "q.jsonl"
    jsonl.write_text(json.dumps({"id": "a", "question": "Who discovered penicillin?"}) + "\n")
    proc = run("predict", str(jsonl), "--no-linker", "--retriever", "bm25")
    assert proc.returncode == 0 and json.loads(proc.stdout)["id"] == "a"
    proc = run("predict", str(tmp_path / "missing.txt"))
    assert proc.returncode == 2 and proc.stderr.strip().splitlines()[-1].startswith(
        "odqa: error: question file not found"
    )


def test_a_question_in_another_language_than_the_index_is_told_so_not_guessed(bm25_index_of):
    from tests.reliability.cli_checks import DOCS

    pipeline = Pipeline(
        OdqaConfig.load(
            overrides={
                "index": str(bm25_index_of(DOCS, "english")),
                "retrieval.retriever": "bm25",
                "linker.enabled": False,
            }
        )
    )
    korean, chinese, english = pipeline.ask_batch(["주제3은 무엇인가?", "主题3是什么？", "what is subject3?"])
    for result, name in ((korean, "Korean"), (chinese, "Chinese")):
        assert not result.answers and not result.passages, result.to_dict()
        assert result.notices and result.notices[-1].startswith("languages differ") and name in result.notices[-1]
        assert "English" in result.notices[-1]
    assert (
        english.answers
        and "Passage 3" in english.answers[0].context
        and not any(n.startswith("languages differ") for n in english.notices)
    )
    # names in Latin script inside a Korean question do not make it English
    assert pipeline.language_differs("Python 프로그래밍 언어를 만든 사람은 누구인가?")
    assert pipeline.language_differs("Who founded Samsung (삼성)?") is None
