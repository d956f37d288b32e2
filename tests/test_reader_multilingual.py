"""The reader path with the multilingual tokenizer (models/encoder-multilingual: XLM-R style Unigram pieces, no
token_type_ids): windows and span labels on Chinese and Korean text, Traditional -> Simplified training data, the
torch and ONNX runtimes, `reader-multilingual` resolution, the exported model card."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from odqa.core.errors import OdqaError
from odqa.core.models import SHIPPED_MODELS
from odqa.reader.training.train import Example, LoadStats, TrainConfig, build_features, simplify_chinese

ENCODER = SHIPPED_MODELS / "encoder-multilingual"
pytestmark = pytest.mark.skipif(not (ENCODER / "tokenizer.json").is_file(), reason="models/encoder-multilingual absent")

# (question, context, answer): DRCD (Traditional), CMRC 2018 (Simplified) and KorQuAD 1.0 style
TRADITIONAL = (
    "陸特和漢斯雷頓開創了哪一地區對梵語的學術研究？",
    "在歐洲，梵語的學術研究，由德國學者陸特和漢斯雷頓開創。後來威廉·瓊斯發現印歐語系，也要歸功於對梵語的研究。",
    "歐洲",
)
SIMPLIFIED = (
    "《跑跑卡丁车》是基于哪款游戏开发的？",
    "基于《跑跑卡丁车》与《泡泡堂》上所开发的游戏，由韩国Nexon开发与发行。中国大陆由盛大游戏运营。",
    "韩国Nexon",
)
KOREAN = (
    "임종석이 여의도 농민 폭력 시위를 주도한 혐의로 지명수배 된 날은?",
    "1989년 2월 15일 여의도 농민 폭력 시위를 주도한 혐의(폭력행위등처벌에관한법률위반)으로 지명수배되었다. "
    "같은 해 6월 30일 평양축전에 임수경을 대표로 파견하여 국가보안법위반 혐의가 추가되었다.",
    "1989년 2월 15일",
)


def _example(qid: str, triple: tuple[str, str, str], filler: str = "") -> Example:
    question, context, answer = triple
    context = filler + context
    start = context.index(answer)
    return Example(qid, question, context, start, start + len(answer))


@pytest.fixture(scope="module")
def tok():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(ENCODER))


def test_windows_are_question_then_passage_without_token_type_ids(tok):
    from odqa.reader.features import tokenize_windows

    question, context, _ = KOREAN
    w = tokenize_windows(tok, [question], [context])
    assert "token_type_ids" not in w.encoding
    ids, seq = w.encoding["input_ids"][0], w.encoding.sequence_ids(0)
    first_sep = seq.index(None, 1)
    assert ids[0] == tok.cls_token_id and ids[first_sep] == ids[first_sep + 1] == ids[-1] == tok.sep_token_id
    assert set(seq[1:first_sep]) == {0} and w.context_start[0] == first_sep + 2 and w.context_end[0] == len(ids) - 2
    spans = [w.offsets[0][j] for j in range(w.context_start[0], w.context_end[0] + 1)]
    assert "".join(context[a:b] for a, b in spans).replace(" ", "") == context.replace(" ", "")


@pytest.mark.parametrize("triple", [TRADITIONAL, SIMPLIFIED, KOREAN], ids=["drcd", "cmrc", "korquad"])
def test_labels_decode_to_the_answer_in_every_window_that_holds_it(tok, triple):
    # a long filler before the passage: several short windows, the answer in the last ones only
    filler = (
        "。".join(["这是一段与问题无关的文字"] * 12) + "。" if triple is not KOREAN else "관계없는 문장입니다. " * 40
    )
    example = _example("q", triple, filler)
    cfg = TrainConfig(train_files=[], output_dir="", max_length=96, stride=32)
    feats = build_features(tok, [example], cfg)
    labelled = [(s, e) for s, e in zip(feats["start"], feats["end"]) if s > 0]
    assert len(feats["start"]) > 2 and labelled and feats["start"][0] == 0
    for i, (s, e) in enumerate(zip(feats["start"], feats["end"])):
        if s > 0:
            assert tok.decode(feats["input_ids"][i][s : e + 1]).strip() == triple[2]


def test_chinese_training_data_folds_to_simplified_with_offsets_kept():
    pytest.importorskip("opencc")
    stats = LoadStats()
    examples = [_example("zh", TRADITIONAL), _example("ko", KOREAN), Example("en", "Who?", "Marie Curie won.", 0, 11)]
    drcd, korean, english = simplify_chinese(examples, stats)
    assert drcd.question == "陆特和汉斯雷顿开创了哪一地区对梵语的学术研究？"
    assert drcd.context[drcd.start_char : drcd.end_char] == "欧洲" and len(drcd.context) == len(TRADITIONAL[1])
    assert (korean, english) == (examples[1], examples[2]) and stats.kept_traditional == 0


def test_a_passage_whose_conversion_changes_length_is_kept_as_it_was(monkeypatch):
    pytest.importorskip("opencc")
    import odqa.indexes.analysis

    monkeypatch.setattr(odqa.indexes.analysis, "to_simplified", lambda text: text + "了")
    stats = LoadStats()
    example = _example("zh", TRADITIONAL)
    assert simplify_chinese([example, example], stats) == [example, example]
    assert stats.kept_traditional == 1  # counted once per passage


def _tiny_multilingual_reader(path, tok):
    from transformers import BertForQuestionAnswering

    from tests.reader_fixtures import tiny_config

    torch.manual_seed(0)
    BertForQuestionAnswering(tiny_config(len(tok))).save_pretrained(str(path))
    tok.save_pretrained(str(path))
    return path


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("ODQA_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def test_onnx_runtime_matches_torch_without_token_type_ids(tok, tmp_path, home):
    pytest.importorskip("onnxruntime")
    from odqa.reader.model import Reader

    folder = _tiny_multilingual_reader(tmp_path / "m", tok)
    questions, contexts = [KOREAN[0], SIMPLIFIED[0]], [KOREAN[1], SIMPLIFIED[1]]
    logits = {}
    for runtime in ("torch", "onnx"):
        reader = Reader.from_pretrained(str(folder), device="cpu", precision="fp32", runtime=runtime)
        _, starts, ends = reader.logits(questions, contexts)
        logits[runtime] = np.concatenate(starts + ends)
    np.testing.assert_allclose(logits["onnx"], logits["torch"], atol=1e-4)


def test_reader_multilingual_resolves_to_the_shipped_folder_and_says_how_to_install_it(
    tok, tmp_path, home, monkeypatch
):
    import odqa.core.models
    from odqa.reader.model import Reader

    monkeypatch.setattr(odqa.core.models, "SHIPPED_MODELS", tmp_path / "models")
    monkeypatch.setattr(odqa.core.models, "installed_models", lambda: {})
    with pytest.raises(OdqaError, match=r"'reader-multilingual' is not installed: pip install 'odqa\[models\]'"):
        Reader.from_pretrained("reader-multilingual")
    _tiny_multilingual_reader(tmp_path / "models" / "reader-multilingual", tok)
    reader = Reader.from_pretrained("reader-multilingual", device="cpu", runtime="torch")
    assert reader.read_batch([KOREAN[0]], [KOREAN[1]])[0] is not None


def test_eval_reader_scores_korean_and_chinese_data_with_their_metrics(tok, tmp_path, home):
    from odqa.eval.reader_eval import evaluate_reader
    from odqa.reader.model import Reader

    reader = Reader.from_pretrained(str(_tiny_multilingual_reader(tmp_path / "m", tok)), device="cpu", runtime="torch")
    for name, (question, context, answer), metric in [("ko", KOREAN, "korquad"), ("zh", SIMPLIFIED, "cmrc2018")]:
        qa = {"id": name, "question": question, "answers": [{"text": answer, "answer_start": context.index(answer)}]}
        data = tmp_path / f"{name}.json"
        data.write_text(
            json.dumps(
                {"data": [{"title": name, "paragraphs": [{"context": context, "qas": [qa]}]}]}, ensure_ascii=False
            ),
            encoding="utf-8",
        )
        assert evaluate_reader(reader, data)["metric"] == metric


def test_export_writes_fp16_weights_and_a_card_from_the_training_info(tok, tmp_path, home):
    from safetensors import safe_open

    from odqa.reader.export import export

    src = _tiny_multilingual_reader(tmp_path / "run" / "final", tok)
    config = {
        **TrainConfig(train_files=["a.json", "b.json"], output_dir="runs/x").to_dict(),
        "init": "encoder-multilingual",
        "max_length": 384,
        "to_simplified": True,
        "progress": False,
    }
    (src / "train_info.json").write_text(json.dumps({"config": config, "steps": 10, "windows": 40, "questions": 30}))
    out = export(str(src), str(tmp_path / "reader-multilingual"), max_length=384, stride=128)
    with safe_open(str(out / "model.safetensors"), "pt") as f:
        assert all(f.get_tensor(k).dtype == torch.float16 for k in f.keys())
    card = (out / "README.md").read_text()
    assert (
        "python run_qa.py train-reader --train a.json b.json --output runs/x --init encoder-multilingual "
        "--max-length 384 --to-simplified --no-progress"
    ) in card
    assert f"python -m odqa.reader.export {src} {out} --max-length 384 --stride 128" in card
    assert json.loads((out / "reader_config.json").read_text())["max_length"] == 384

    (out / "README.md").write_text("# measured card\n")
    settings_file = out / "reader_config.json"
    settings_file.write_text(json.dumps({**json.loads(settings_file.read_text()), "max_answer_tokens": 12}))
    export(str(src), str(out))
    assert (out / "README.md").read_text() == "# measured card\n"  # a written card is never replaced
    assert json.loads(settings_file.read_text())["max_answer_tokens"] == 12  # nor a bound chosen on dev


def test_reader_for_language_picks_the_multilingual_reader_only_where_it_is_installed(tok, tmp_path, monkeypatch):
    import odqa.core.models
    from odqa.reader.settings import reader_for_language

    monkeypatch.setattr(odqa.core.models, "SHIPPED_MODELS", tmp_path / "models")
    monkeypatch.setattr(odqa.core.models, "installed_models", lambda: {})
    assert reader_for_language("en")[0] == "reader"
    name, why = reader_for_language("ko")
    assert name == "reader" and "reader-multilingual is not installed" in why
    _tiny_multilingual_reader(tmp_path / "models" / "reader-multilingual", tok)
    assert reader_for_language("ko") == ("reader-multilingual", "Korean text")
    assert reader_for_language("zh")[0] == "reader-multilingual"
    assert reader_for_language("en")[0] == "reader"  # English keeps the English reader


def test_a_korean_index_is_read_by_the_multilingual_reader_without_any_flag(tok, tmp_path, home, monkeypatch, caplog):
    pytest.importorskip("kiwipiepy", reason="pip install -e '.[cjk]'")
    import logging

    import odqa.core.models
    from odqa.config import OdqaConfig
    from odqa.indexing import IndexSpec, build_index
    from odqa.pipeline import Pipeline

    monkeypatch.setattr(odqa.core.models, "SHIPPED_MODELS", tmp_path / "models")
    monkeypatch.setattr(odqa.core.models, "installed_models", lambda: {})
    folder = _tiny_multilingual_reader(tmp_path / "models" / "reader-multilingual", tok)
    corpus = tmp_path / "ko.jsonl"
    corpus.write_text(
        "\n".join(
            json.dumps({"id": str(i), "title": t, "text": x}, ensure_ascii=False)
            for i, (t, x) in enumerate([("임종석", KOREAN[1]), ("한글", "한글은 세종대왕이 1443년에 창제한 문자이다.")])
        ),
        encoding="utf-8",
    )
    build_index(IndexSpec(corpus=str(corpus), out=str(tmp_path / "idx"), backends=["bm25"], kb=False))
    config = OdqaConfig.load(
        None,
        {"index": str(tmp_path / "idx"), "retrieval.retriever": "bm25", "linker.enabled": False, "runtime": "torch"},
    )
    assert config.reader.model == "auto"
    pipeline = Pipeline(config)
    with caplog.at_level(logging.INFO, logger="odqa"):
        result = pipeline.ask(KOREAN[0])
    assert pipeline.reader_name == "reader-multilingual"
    assert pipeline.inference_plans()["reader"]["model"] == "reader-multilingual"  # --json's inference block
    assert pipeline.reader.name in {"reader-multilingual", str(folder)}
    assert any("reader reader-multilingual for Korean text" in r.getMessage() for r in caplog.records)
    assert result.passages and result.passages[0].passage.title == "임종석"
    assert not any("languages differ" in n for n in result.notices)


@pytest.mark.parametrize("languages, told", [(["en"], True), (["en", "ko", "zh"], False), (None, False)])
def test_a_reader_not_trained_on_the_index_language_says_so_and_is_never_confident(
    tok, tmp_path, home, languages, told
):
    """Issue 64 item 4: the English reader over a Korean index answers with a notice and `confident` false (CLI,
    JSON, shell and page all print `notices`); a reader that records Korean, or records nothing, gets none."""
    from odqa.config import OdqaConfig
    from odqa.indexing import IndexSpec, build_index
    from odqa.pipeline import Pipeline
    from odqa.reader.calibration import Calibration

    folder = _tiny_multilingual_reader(tmp_path / "m", tok)
    (folder / "reader_config.json").write_text(json.dumps({"languages": languages}))
    Calibration(weights=[0.0, 0.0], bias=10.0, threshold=0.5, fitted=True).save(
        folder / "calibration.json"
    )  # always "sure"
    corpus = tmp_path / "ko.jsonl"
    corpus.write_text(
        json.dumps({"id": "0", "title": "임종석", "text": KOREAN[1]}, ensure_ascii=False), encoding="utf-8"
    )
    build_index(IndexSpec(corpus=str(corpus), out=str(tmp_path / "idx"), backends=["bm25"], language="ko"))
    pipeline = Pipeline(
        OdqaConfig.load(
            None,
            {
                "index": str(tmp_path / "idx"),
                "retrieval.retriever": "bm25",
                "linker.enabled": False,
                "runtime": "torch",
                "reader.model": str(folder),
                "reader.no_answer_threshold": None,
            },
        )
    )
    result = pipeline.ask(KOREAN[0])
    assert result.answers
    notices = [n for n in result.notices if "trained on" in n]
    assert bool(notices) is told, result.notices
    if told:
        assert "English" in notices[0] and "Korean" in notices[0] and "reader-multilingual" in notices[0]
        assert not result.confident and not result.to_dict()["confident"]
        assert not any(a.confident for a in result.answers)
    else:
        assert result.confident
