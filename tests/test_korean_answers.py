"""A Korean question over a Korean index is read by the shipped multilingual reader in every interface (issue 63):
the Python API, `ask --json`, the shell and the HTTP server each return a Korean span of a retrieved passage with
its calibrated probability, and name `reader-multilingual` where they say which reader read. Which span the model
picks is not asserted (another CPU or precision may pick another): only what any answer must be."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from odqa.core.models import SHIPPED_MODELS

REPO_ROOT = SHIPPED_MODELS.parent
SHIPPED = SHIPPED_MODELS / "reader-multilingual"
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not (SHIPPED / "model.safetensors").is_file(), reason="models/reader-multilingual absent"),
]
HANGUL = re.compile("[\uac00-\ud7a3]")
DOCS = [
    {
        "id": "ko1",
        "title": "임진왜란",
        "text": "임진왜란은 1592년 일본이 조선을 침략하면서 시작된 전쟁이다. 이순신 장군이 한산도 대첩에서 승리하였다.",
    },
    {"id": "ko2", "title": "한글", "text": "한글은 1443년 세종대왕이 창제한 문자이다. 훈민정음이라고도 부른다."},
    {"id": "ko3", "title": "서울", "text": "서울은 대한민국의 수도이며 한강이 도시를 가로지른다."},
]
QUESTION = "한글을 창제한 사람은 누구인가?"
TEXTS = {d["id"]: d["text"] for d in DOCS}


@pytest.fixture(scope="module")
def korean_index(bm25_index_of):
    return bm25_index_of(DOCS, "korean")


def _check_answer(answer: dict) -> None:
    """What any answer of the multilingual reader over DOCS must be, whichever span it picks (a year is as
    Korean a span of these passages as a name)."""
    assert answer["text"].strip(), answer
    passage = TEXTS[answer["passage_id"].rsplit("_", 1)[0]]  # each document is one passage: its id + "_0"
    assert passage[answer["start"] : answer["end"]] == answer["text"]
    assert 0.0 <= answer["probability"] <= 1.0


def _pipeline(index):
    from odqa.config import OdqaConfig
    from odqa.pipeline import Pipeline

    return Pipeline(
        OdqaConfig.load(None, {"index": str(index), "retrieval.retriever": "bm25", "linker.enabled": False})
    )


def test_python_api(korean_index):
    pipeline = _pipeline(korean_index)
    result = pipeline.ask(QUESTION)
    assert pipeline.reader_name == "reader-multilingual" and pipeline.reader.calibration.fitted
    assert result.answers and all(a.calibrated for a in result.answers)
    _check_answer(result.answers[0].to_dict())
    assert not any("trained on" in n or "languages differ" in n for n in result.notices), result.notices


def test_ask_json_names_the_reader_in_its_inference_plan(korean_index, capsys):
    from odqa.cli import main

    assert main(["ask", "--json", "--index", str(korean_index), "--retriever", "bm25", "--no-linker", QUESTION]) == 0
    data = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert data["inference"]["reader"]["model"] == "reader-multilingual"
    _check_answer(data["answers"][0])


@pytest.mark.subprocess
def test_shell_answers_in_korean(korean_index):
    proc = subprocess.run(
        [sys.executable, "run_qa.py", "shell", "--index", str(korean_index), "--retriever", "bm25", "--no-linker"],
        cwd=REPO_ROOT,
        input=f"{QUESTION}\n",
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    first = next(line for line in proc.stdout.splitlines() if line.strip().startswith("1. "))
    assert HANGUL.search(first) and re.search(r"p=0\.\d\d|p=1\.00", first), (
        proc.stdout
    )  # the line ends with the Korean title


def test_server_answers_in_korean(korean_index):
    from fastapi.testclient import TestClient

    from odqa.serve.app import create_app

    with TestClient(create_app(_pipeline(korean_index))) as client:
        result = client.post("/ask", json={"question": QUESTION, "k": 3}).json()
        info = client.get("/info").json()
    assert result["language"] == "ko"
    _check_answer(result["answers"][0])
    assert "reader-multilingual" in json.dumps(info)
