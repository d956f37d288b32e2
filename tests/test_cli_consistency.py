"""The command line behaves alike across commands (issue 64, items 9 and 10): `search --trec-run` writes the run
trec_eval scores (the question file's ids, documents where qrels judge, finite scores), `--index` everywhere, a
mistyped flag or command answered with a suggestion, `-q` silencing progress bars, `python -m odqa`, the
eval-retrieval table lined up, eval-reader's --precision/--runtime those of the other commands."""

from __future__ import annotations

import argparse
import json
import math
import re
import subprocess
import sys

import pytest

from odqa.cli import build_parser, main
from tests.conftest import REPO_ROOT
from tests.retrieval_cli import ARTICLES, QUESTIONS, run

BEIR_CORPUS = [
    {
        "_id": "doc-a",
        "title": "Penicillin",
        "text": "Penicillin was discovered by Alexander Fleming in 1928. "
        "It was the first antibiotic. It saved millions of lives.",
    },
    {"_id": "doc-b", "title": "Everest", "text": "Mount Everest is the highest mountain on Earth. It lies in Nepal."},
    {"_id": "doc-c", "title": "Amazon", "text": "The Amazon carries more water than any other river on Earth."},
]
QUERIES = [{"_id": "q-17", "text": "penicillin discovered by fleming"}, {"_id": "q-4", "text": "highest mountain"}]
BAR = re.compile(r"it/s|s/it|\d+%\||[█▏▎▍▌▋▊▉]")  # what a tqdm bar draws


@pytest.fixture(scope="module")
def indexes(tmp_path_factory):
    root = tmp_path_factory.mktemp("consistency")
    (root / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in BEIR_CORPUS))
    (root / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in QUERIES))
    (root / "articles.jsonl").write_text("".join(json.dumps(a) + "\n" for a in ARTICLES))
    (root / "q.qa.tsv").write_text(QUESTIONS)
    # 8-word passages: each BEIR document is cut into several passages, whose ids are not the document's
    run("index", "--corpus", root / "corpus.jsonl", "--out", root / "beir", "--backends", "bm25", "--words", "8")
    run("index", "--corpus", root / "articles.jsonl", "--out", root / "wiki", "--backends", "bm25")
    return root


def _trec_lines(path) -> list[list[str]]:
    lines = [line.split() for line in path.read_text().splitlines()]
    for qid, q0, docid, rank, score, tag in lines:  # six columns each
        assert q0 == "Q0" and int(rank) >= 1 and math.isfinite(float(score)), (qid, docid, rank, score, tag)
    return lines


# ---- 9. search --trec-run ---------------------------------------------------------------------------------------


def test_search_trec_run_carries_the_question_files_ids_and_names_documents(indexes):
    run(
        "search",
        "--index",
        indexes / "beir",
        "--retriever",
        "bm25",
        "--questions",
        indexes / "queries.jsonl",
        "--k",
        "2",
        "--trec-run",
        indexes / "beir.trec",
        "--dpr-json",
        indexes / "beir.dpr.json",
    )
    lines = _trec_lines(indexes / "beir.trec")
    assert list(dict.fromkeys(line[0] for line in lines)) == ["q-17", "q-4"]  # the file's ids, in its order
    by_query = {qid: [line for line in lines if line[0] == qid] for qid in ("q-17", "q-4")}
    for ranked in by_query.values():
        assert [int(line[3]) for line in ranked] == list(range(1, len(ranked) + 1)) and 1 <= len(ranked) <= 2
        assert [float(line[4]) for line in ranked] == sorted((float(line[4]) for line in ranked), reverse=True)
        assert all(line[5] == "odqa-bm25" for line in ranked)
    # documents, as the qrels of a BEIR set name them (each once), where the index holds passages doc-a_0, ...
    assert by_query["q-17"][0][2] == "doc-a" and by_query["q-4"][0][2] == "doc-b"
    assert all(line[2] in {d["_id"] for d in BEIR_CORPUS} for line in lines)
    assert all(len({line[2] for line in ranked}) == len(ranked) for ranked in by_query.values())
    # the same run eval-retrieval --qrels writes for these questions
    (indexes / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\nq-17\tdoc-a\t1\nq-4\tdoc-b\t1\n")
    run(
        "eval-retrieval",
        "--index",
        indexes / "beir",
        "--retriever",
        "bm25",
        "--queries",
        indexes / "queries.jsonl",
        "--qrels",
        indexes / "qrels.tsv",
        "--k",
        "2",
        "--trec-run",
        indexes / "eval.trec",
    )
    evaluated = _trec_lines(indexes / "eval.trec")
    assert [line[:3] for line in lines] == [line[:3] for line in evaluated if int(line[3]) <= 2]
    dpr = json.loads((indexes / "beir.dpr.json").read_text())
    assert [q["id"] for q in dpr] == ["q-17", "q-4"]


def test_search_trec_run_of_questions_with_answers_names_passages_as_eval_retrieval(indexes):
    run(
        "search",
        "--index",
        indexes / "wiki",
        "--retriever",
        "bm25",
        "--questions",
        indexes / "q.qa.tsv",
        "--k",
        "2",
        "--trec-run",
        indexes / "qa.trec",
    )
    run(
        "eval-retrieval",
        "--index",
        indexes / "wiki",
        "--retriever",
        "bm25",
        "--questions",
        indexes / "q.qa.tsv",
        "--k",
        "2",
        "--trec-run",
        indexes / "qa-eval.trec",
    )
    searched, evaluated = _trec_lines(indexes / "qa.trec"), _trec_lines(indexes / "qa-eval.trec")
    assert [line[:4] for line in searched] == [line[:4] for line in evaluated]
    assert list(dict.fromkeys(line[0] for line in searched)) == ["0", "1", "2"]  # DPR qas ids: line numbers from 0


def test_search_takes_a_query_id_for_a_typed_question(indexes):
    run(
        "search",
        "--index",
        indexes / "beir",
        "--retriever",
        "bm25",
        "--query-id",
        "q-17",
        "--k",
        "1",
        "--trec-run",
        indexes / "one.trec",
        "who discovered penicillin",
    )
    [[qid, _, docid, rank, _, _]] = _trec_lines(indexes / "one.trec")
    assert (qid, docid, rank) == ("q-17", "doc-a", "1")
    for argv, problem in (
        (["--query-id", "a", "b", "--", "one question"], "2 ids for 1 questions"),
        (["--questions", indexes / "queries.jsonl", "extra question"], "not both"),
        ([], "no question to search"),
    ):
        proc = run("search", "--index", indexes / "beir", *argv, check_ok=False)
        assert proc.returncode == 2 and problem in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_a_trec_run_never_holds_an_infinite_or_nan_score(tmp_path):
    import io

    import ir_measures

    from odqa.eval.run_formats import TrecRunWriter

    out = io.StringIO()
    TrecRunWriter(out, "t").write("q1", [("a", math.inf), ("b", 3.0), ("c", math.nan), ("d", 1.0), ("e", -math.inf)])
    (tmp_path / "r.trec").write_text(out.getvalue())
    scores = [float(line.split()[4]) for line in out.getvalue().splitlines()]
    assert all(math.isfinite(s) for s in scores) and scores == sorted(scores, reverse=True)
    assert scores[2] == 3.0  # NaN keeps its place: the score above it
    ranked = sorted(ir_measures.read_trec_run(str(tmp_path / "r.trec")), key=lambda d: -d.score)
    assert [d.doc_id for d in ranked][:2] == ["a", "b"] and ranked[-1].doc_id == "e"


# ---- 10a. verify-index --index ----------------------------------------------------------------------------------


def test_verify_index_takes_index_as_every_command_does(indexes):
    for argv in (["--index", indexes / "wiki"], [indexes / "wiki"]):
        proc = run("verify-index", *argv)
        assert proc.stdout.strip().splitlines()[-1] == f"{indexes / 'wiki'}: ok"
    for argv, problem in (
        ([indexes / "wiki", "--index", indexes / "beir"], "two index folders"),
        ([], "odqa verify-index --index DIR"),
    ):
        proc = run("verify-index", *argv, check_ok=False)
        assert proc.returncode == 2 and problem in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


# ---- 10b. a mistyped flag or command ----------------------------------------------------------------------------


def _refused(argv, capsys) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    return capsys.readouterr().err


def test_a_mistyped_flag_gets_the_commands_usage_and_a_suggestion(capsys):
    err = _refused(["search", "--retreiver", "bm25", "q"], capsys)
    assert err.startswith("usage: odqa search ")
    assert err.strip().splitlines()[-1] == (
        "odqa search: error: unrecognized arguments: --retreiver; did you mean "
        "--retriever? (odqa search --help lists its options)"
    )
    # with a value after '=', and where it leaves a required option missing, the misspelling is what is named
    assert "did you mean --retriever?" in _refused(["eval-retrieval", "--retreiver=bm25", "--questions", "q"], capsys)
    err = _refused(["index", "--corpsu", "c.jsonl", "--out", "o"], capsys)
    assert "--corpsu; did you mean --corpus?" in err and "required" not in err
    # a flag nothing resembles: named, no guess
    assert "unrecognized arguments: --zzz (odqa ask --help" in _refused(["ask", "--zzz", "q"], capsys)


def test_a_mistyped_command_gets_a_suggestion(capsys):
    err = _refused(["serach", "penicillin"], capsys)
    assert err.startswith("usage: odqa ") and err.strip().splitlines()[-1] == (
        "odqa: error: unknown command 'serach'; did you mean search? (odqa --help lists the commands)"
    )
    assert "did you mean eval-retrieval?" in _refused(["eval-retreival", "--k", "1"], capsys)


def test_abbreviations_and_short_flags_still_parse():
    parser = build_parser()
    args = parser.parse_args(["search", "--retr", "bm25", "-q", "--", "-who wrote it"])
    assert args.retriever == "bm25" and args.quiet and args.question == ["-who wrote it"]


# ---- 10c. -q silences progress bars -------------------------------------------------------------------------------


def test_quiet_silences_progress_bars_as_well_as_notes(indexes, tmp_path):
    loud = run("index", "--corpus", indexes / "articles.jsonl", "--out", tmp_path / "loud", "--backends", "bm25")
    assert BAR.search(loud.stderr)  # the bars -q is to silence
    proc = run("index", "-q", "--corpus", indexes / "articles.jsonl", "--out", tmp_path / "quiet", "--backends", "bm25")
    assert not BAR.search(proc.stderr) and "odqa:" not in proc.stderr, proc.stderr
    proc = run(
        "eval-retrieval",
        "--quiet",
        "--index",
        indexes / "wiki",
        "--retriever",
        "bm25",
        "--questions",
        indexes / "q.qa.tsv",
        "--k",
        "1",
        "--json",
    )
    assert not BAR.search(proc.stderr), proc.stderr
    assert json.loads(proc.stdout.splitlines()[-1])["questions"] == 3


def test_progress_bars_come_back_after_a_quiet_command():
    import io

    from tqdm.auto import tqdm

    from odqa.core.logs import progress_bars_hidden

    with progress_bars_hidden():
        assert tqdm(range(3), file=io.StringIO()).disable
    shown = io.StringIO()
    for _ in tqdm(range(3), file=shown):
        pass
    assert "3/3" in shown.getvalue()


# ---- 10d. python -m odqa -------------------------------------------------------------------------------------------


@pytest.mark.subprocess
def test_python_m_odqa_is_the_odqa_command(indexes):
    def odqa(*argv):
        return subprocess.run(
            [sys.executable, "-m", "odqa", *map(str, argv)], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300
        )

    proc = odqa("--version")
    assert proc.returncode == 0 and proc.stdout.startswith("odqa ")
    proc = odqa("verify-index", "--index", indexes / "wiki")
    assert proc.returncode == 0 and proc.stdout.strip().endswith(": ok")
    proc = odqa("verify-index", "--index", indexes / "missing")  # the command's own exit code passes through
    assert proc.returncode == 2 and proc.stderr.startswith("odqa: error:")
    assert odqa("serach").returncode == 2


# ---- 10e. the eval-retrieval table --------------------------------------------------------------------------------


def _columns_line_up(table: str) -> list[list[str]]:
    lines = table.strip().splitlines()
    bars = [[i for i, c in enumerate(line) if c == "|"] for line in lines]
    assert all(b == bars[0] for b in bars), table  # every cell as wide as its header, in the header's order
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines]


def test_the_eval_retrieval_table_lines_up(indexes):
    proc = run(
        "eval-retrieval",
        "--index",
        indexes / "wiki",
        "--retriever",
        "bm25",
        "--questions",
        indexes / "q.qa.tsv",
        "--k",
        "1",
        "2",
    )
    table = "\n".join(line for line in proc.stdout.splitlines() if line.startswith("|"))
    header, _, row = _columns_line_up(table)
    assert header == ["recall@1 %", "recall@2 %", "mrr %", "questions"]
    assert row[-1] == "3" and all(re.fullmatch(r"\d+\.\d\d", cell) for cell in row[:-1])


def test_every_metrics_table_lines_up():
    from odqa.eval.qrels import format_table as qrels_table
    from odqa.eval.retrieval import format_table

    metrics = {
        "recall@1": 100.0,
        "recall@20": 5.0,
        "mrr": 100.0,
        "questions": 1234567,
        "gold_recall@1": 100.0,
        "gold_recall@20": 0.0,
    }
    answer_table, gold_table = format_table({**metrics, "gold_questions": 1000}, [1, 20]).split("\n\n")
    header, _, row = _columns_line_up(answer_table)
    assert header == ["recall@1 %", "recall@20 %", "mrr %", "questions"]
    assert row == ["100.00", "5.00", "100.00", "1234567"]
    # each value under its own label (issue 77: gold_recall's label stood in the mrr column), explained beneath
    gold_header, _, gold, note = _columns_line_up(gold_table.rsplit("\n", 1)[0]) + [gold_table.rsplit("\n", 1)[1]]
    assert gold_header == ["gold_recall@1 %", "gold_recall@20 %", "questions with a gold paragraph"]
    assert gold == ["100.00", "0.00", "1000"] and note.startswith("gold_recall@k: of the questions whose data")
    metrics = {"nDCG@10": 0.5, "MRR@10": 1.0, "R@1": 0.25, "R@1000": 1.0, "questions": 12}
    header, _, row = _columns_line_up(qrels_table(metrics, [1, 1000]))
    assert header == ["nDCG@10", "MRR@10", "R@1", "R@1000", "questions"] and row[2:] == ["0.2500", "1.0000", "12"]


# ---- 10f. eval-reader's --precision and --runtime --------------------------------------------------------------------


def _option(command: str, flag: str):
    parser = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return next((a for a in parser.choices[command]._actions if flag in a.option_strings), None)


def test_eval_reader_takes_the_precision_and_runtime_of_the_other_commands():
    for flag in ("--precision", "--runtime", "--device"):
        reference = _option("ask", flag)
        for command in ("eval-reader", "search", "eval-retrieval", "eval-qa", "predict"):
            option = _option(command, flag)
            assert (option.choices, option.default, option.help) == (
                reference.choices,
                reference.default,
                reference.help,
            ), (command, flag)
    assert _option("eval-reader", "--bf16") is None and _option("eval-reader", "--int8") is None


def test_eval_reader_reads_with_the_precision_and_runtime_given(tmp_path, capsys):
    from tests.reader_fixtures import save_tiny_qa
    from tests.squad_files import tiny_squad

    model = save_tiny_qa(tmp_path / "tiny")
    data = tiny_squad(tmp_path / "tiny.json")
    assert (
        main(
            [
                "eval-reader",
                "--data",
                str(data),
                "--model",
                str(model),
                "--json",
                "--threads",
                "1",
                "--precision",
                "int8",
                "--runtime",
                "torch",
            ]
        )
        == 0
    )
    plan = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["inference"]["reader"]
    assert (plan["runtime"], plan["precision"]) == ("torch", "int8")
