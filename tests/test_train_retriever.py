"""Dense retriever training: DPR data building and reading, the NLL loss by hand, gradient caching,
checkpoint resume, a few steps that lower the loss, hybrid tuning, and the CLI."""

from __future__ import annotations

import json
import math

import pytest
import torch

from odqa.core.errors import OdqaError
from odqa.indexing import IndexSpec, build_index
from odqa.retriever.training.losses import dpr_nll_loss, positive_ranks
from odqa.retriever.training.train_data import ReadStats, build_dpr_data, read_dpr_file
from tests.retrievers import built_retriever

# ---------------------------------------------------------------------------------------------------- fixtures

DOCS = [
    {
        "id": "1",
        "title": "Mount Everest",
        "text": "Mount Everest is the highest mountain on Earth, 8,849 metres above sea level, in the Himalayas.",
    },
    {
        "id": "2",
        "title": "K2",
        "text": "K2 is the second highest mountain on Earth, in the Karakoram range, first climbed in 1954.",
    },
    {
        "id": "3",
        "title": "Mont Blanc",
        "text": "Mont Blanc is the highest mountain of the Alps, on the border of France and Italy.",
    },
    {
        "id": "4",
        "title": "Nile",
        "text": "The Nile is a long river in Africa that flows north into the Mediterranean Sea.",
    },
    {
        "id": "5",
        "title": "Amazon River",
        "text": "The Amazon River in South America carries more water than any other river on Earth.",
    },
    {
        "id": "6",
        "title": "Danube",
        "text": "The Danube is the second longest river in Europe and flows into the Black Sea.",
    },
]

QUESTIONS = [
    ("what is the highest mountain on earth", ["Mount Everest", "Everest"]),
    ("which river carries the most water on earth", ["Amazon"]),
    ("which sea does the danube river flow into", ["Black Sea"]),
    ("what mountain is the highest of the alps", ["Pluto"]),  # no passage holds the answer: dropped
]


@pytest.fixture(scope="module")
def tiny_index(bm25_index_of):
    return bm25_index_of(DOCS, "dpr-corpus")


@pytest.fixture()
def qa_tsv(tmp_path):
    path = tmp_path / "dev.qa.tsv"
    path.write_text("".join(f"{q}\t{json.dumps(a)}\n" for q, a in QUESTIONS))
    return path


def _tiny_encoder(path, hidden=32, dropout=0.1, seed=0):
    from transformers import BertConfig, BertModel

    from tests.reader_fixtures import minilm_tokenizer

    tok = minilm_tokenizer()
    torch.manual_seed(seed)
    cfg = BertConfig(
        vocab_size=len(tok),
        hidden_size=hidden,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=2 * hidden,
        max_position_embeddings=128,
        hidden_dropout_prob=dropout,
        attention_probs_dropout_prob=dropout,
    )
    BertModel(cfg).save_pretrained(str(path))
    tok.save_pretrained(str(path))
    return path


def _example(i: int) -> dict:
    topics = [
        "volcano",
        "penguin",
        "violin",
        "glacier",
        "satellite",
        "pyramid",
        "tornado",
        "cathedral",
        "submarine",
        "orchid",
        "telescope",
        "desert",
    ]
    t = topics[i % len(topics)]
    other = topics[(i + 5) % len(topics)]
    return {
        "id": str(i),
        "question": f"tell me about the {t}",
        "answers": [t],
        "positive_ctxs": [
            {"title": t.title(), "text": f"the {t} is described here: a {t} {t} facts", "passage_id": f"p{i}"}
        ],
        "hard_negative_ctxs": [
            {"title": other.title(), "text": f"the {other} is described here: about {other}", "passage_id": f"n{i}"}
        ],
    }


@pytest.fixture()
def train_file(tmp_path):
    path = tmp_path / "train.jsonl"
    path.write_text("".join(json.dumps(_example(i)) + "\n" for i in range(12)))
    return path


# ---------------------------------------------------------------------------------------------------- loss


def test_dpr_loss_matches_a_hand_computation():
    # 2 questions x (1 positive + 1 hard negative): candidates = [pos1, pos2, neg1, neg2]
    q = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    p = torch.tensor([[1.0, 0.0], [0.6, 0.8], [0.0, 1.0], [0.8, 0.6]])
    # question 1 scores: 1, 0.6, 0, 0.8 (target column 0); question 2: 0, 0.8, 1, 0.6 (target column 1)
    l1 = -math.log(math.exp(1.0) / (math.exp(1.0) + math.exp(0.6) + math.exp(0.0) + math.exp(0.8)))
    l2 = -math.log(math.exp(0.8) / (math.exp(0.0) + math.exp(0.8) + math.exp(1.0) + math.exp(0.6)))
    assert dpr_nll_loss(q, p).item() == pytest.approx((l1 + l2) / 2, abs=1e-6)
    # scale multiplies every score
    s1 = -math.log(math.exp(2.0) / (math.exp(2.0) + math.exp(1.2) + math.exp(0.0) + math.exp(1.6)))
    s2 = -math.log(math.exp(1.6) / (math.exp(0.0) + math.exp(1.6) + math.exp(2.0) + math.exp(1.2)))
    assert dpr_nll_loss(q, p, scale=2.0).item() == pytest.approx((s1 + s2) / 2, abs=1e-6)
    # masking question 2's candidate 2 (a passage that also answers it) removes it from its softmax only
    mask = torch.tensor([[False, False, False, False], [False, False, True, False]])
    m2 = -math.log(math.exp(0.8) / (math.exp(0.0) + math.exp(0.8) + math.exp(0.6)))
    assert dpr_nll_loss(q, p, mask=mask).item() == pytest.approx((l1 + m2) / 2, abs=1e-6)
    # the target is never masked, even if asked
    assert torch.isfinite(dpr_nll_loss(q, p, mask=torch.ones(2, 4, dtype=torch.bool)))
    # ranks: question 1's positive is first; question 2's (0.8) is behind candidate 2 (1.0)
    assert positive_ranks(q, p).tolist() == [1, 2]
    assert positive_ranks(q, p, mask=mask).tolist() == [1, 1]


# ---------------------------------------------------------------------------------------------------- data


def test_distillation_loss_matches_a_hand_computation():
    from odqa.retriever.training.distill_loss import score_distillation_loss

    # one question, two candidates; vectors are 1-d, so the scores are the products themselves
    sq, sp = torch.tensor([[1.0]]), torch.tensor([[1.0], [0.0]])  # student scores (1, 0)
    tq, tp = torch.tensor([[1.0]]), torch.tensor([[0.0], [0.0]])  # teacher scores (0, 0): uniform
    # KL(t || s) = sum t * (log t - log s) with t = (1/2, 1/2), s = softmax(1, 0)
    s1, s2 = math.exp(1) / (math.exp(1) + 1), 1 / (math.exp(1) + 1)
    expected = 0.5 * (math.log(0.5) - math.log(s1)) + 0.5 * (math.log(0.5) - math.log(s2))
    assert float(score_distillation_loss(sq, sp, tq, tp)) == pytest.approx(expected, abs=1e-6)
    assert float(score_distillation_loss(sq, sp, sq, sp, scale=20.0)) == pytest.approx(0.0, abs=1e-6)
    # a masked candidate leaves both distributions: one candidate left, both put all mass on it -> 0
    mask = torch.tensor([[False, True]])
    assert float(score_distillation_loss(sq, sp, tq, tp, mask=mask)) == pytest.approx(0.0, abs=1e-6)
    # ... but the question's own positive is never masked out
    assert float(score_distillation_loss(sq, sp, tq, tp, mask=torch.tensor([[True, False]]))) == pytest.approx(
        expected, abs=1e-6
    )
    # gradients reach the student only
    sq.requires_grad_()
    tq.requires_grad_()
    score_distillation_loss(sq, sp, tq, tp).backward()
    assert sq.grad is not None and float(sq.grad.abs().sum()) > 0 and tq.grad is not None
    with pytest.raises(ValueError, match="same dimension"):
        score_distillation_loss(sq, sp, torch.ones(1, 2), torch.ones(2, 2))


def test_builder_positives_hard_negatives_drops_and_resume(tiny_index, qa_tsv, tmp_path):
    out = tmp_path / "dpr.jsonl"
    stats = build_dpr_data([qa_tsv], tiny_index, out, k=4, batch_size=2, progress=False)
    assert stats.questions == 4 and stats.written == 3 and stats.dropped_no_positive == 1
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert [r["id"] for r in rows] == ["dev.qa.tsv:0", "dev.qa.tsv:1", "dev.qa.tsv:2"]
    first = rows[0]
    assert first["positive_ctxs"][0]["title"] == "Mount Everest"
    for r in rows:
        assert r["positive_ctxs"] and all(
            any(a.lower() in c["text"].lower() for a in r["answers"]) for c in r["positive_ctxs"]
        )
        assert all(not any(a.lower() in c["text"].lower() for a in r["answers"]) for c in r["hard_negative_ctxs"])
        assert r["hard_negative_ctxs"], "BM25's other hits are hard negatives"
        for c in r["positive_ctxs"] + r["hard_negative_ctxs"]:
            assert set(c) >= {"title", "text", "passage_id"}
    # a rerun skips the written and the dropped questions
    again = build_dpr_data([qa_tsv], tiny_index, out, k=4, progress=False)
    assert again.already_done == 4 and again.written == 0
    assert len(out.read_text().splitlines()) == 3
    # a line cut by a crash is rebuilt
    text = out.read_text().splitlines()
    out.write_text("\n".join(text[:2]) + "\n" + text[2][:40])
    (tmp_path / "dpr.jsonl.dropped").write_text("")
    third = build_dpr_data([qa_tsv], tiny_index, out, k=4, progress=False)
    assert third.written == 1 and third.dropped_no_positive == 1
    assert [json.loads(x)["id"] for x in out.read_text().splitlines()] == [
        "dev.qa.tsv:0",
        "dev.qa.tsv:1",
        "dev.qa.tsv:2",
    ]


def test_builder_regex_answers_and_squad_gold_paragraph(tiny_index, tmp_path):
    trec = tmp_path / "curated-train.tsv"
    trec.write_text("1\tfactoid\twhat is the highest mountain on earth\tMount\\s+Everest\n")
    squad = tmp_path / "dev-v2.0.json"
    squad.write_text(
        json.dumps(
            {
                "data": [
                    {
                        "title": "Danube",
                        "paragraphs": [
                            {
                                "context": "The Danube flows through ten countries and into the Black Sea.",
                                "qas": [
                                    {
                                        "id": "q1",
                                        "question": "which sea does the danube river flow into",
                                        "is_impossible": False,
                                        "answers": [{"text": "Black Sea", "answer_start": 51}],
                                    },
                                    {"id": "q2", "question": "unanswerable", "is_impossible": True, "answers": []},
                                ],
                            }
                        ],
                    }
                ]
            }
        )
    )
    out = tmp_path / "mix.jsonl"
    stats = build_dpr_data([trec, squad], tiny_index, out, k=6, progress=False)
    rows = {r["source"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert stats.written == 2 and stats.questions == 2  # the unanswerable SQuAD question is not loaded
    assert (
        rows["curated-train.tsv"]["regex"] and rows["curated-train.tsv"]["positive_ctxs"][0]["title"] == "Mount Everest"
    )
    gold = rows["dev-v2.0.json"]
    assert gold["positive_ctxs"] == [
        {
            "title": "Danube",
            "text": "The Danube flows through ten countries and into the Black Sea.",
            "passage_id": "gold:q1",
        }
    ]
    assert all("Black Sea" not in c["text"] for c in gold["hard_negative_ctxs"])


def test_builder_dev_split_is_set_aside_before_the_positive_filter(tiny_index, tmp_path):
    from odqa.corpus.questions import load_questions
    from odqa.retriever.training.train_data import in_dev_split

    qa = tmp_path / "nq-dev.qa.tsv"
    many = [(q, a) for q, a in QUESTIONS for _ in range(10)]  # 40 questions, 10 without any answer in the corpus
    qa.write_text("".join(f"{q}\t{json.dumps(a)}\n" for q, a in many))
    trec = tmp_path / "curated-train.tsv"
    trec.write_text(
        "".join(f"{i}\tfactoid\twhat is the highest mountain on earth\tMount\\s+Everest\n" for i in range(20))
    )
    out, dev_dir = tmp_path / "train.jsonl", tmp_path / "dev"
    stats = build_dpr_data([qa, trec], tiny_index, out, k=4, progress=False, dev_fraction=0.3, dev_dir=dev_dir)
    expected = [f"nq-dev.qa.tsv:{i}" for i in range(40) if in_dev_split(f"nq-dev.qa.tsv:{i}", 0.3)]
    assert 0 < len(expected) < 40
    dev_rows = [json.loads(x) for x in (dev_dir / "nq-dev.qa.dev.jsonl").read_text().splitlines()]
    assert [r["id"] for r in dev_rows] == expected
    # questions without a positive stay in the dev split (the training file drops them)
    assert any(r["answers"] == ["Pluto"] for r in dev_rows)
    trained = {json.loads(x)["id"] for x in out.read_text().splitlines()}
    assert not trained & {r["id"] for r in dev_rows}
    assert stats.dev == len(expected) + stats.per_source["curated-train.tsv"]["dev"]
    assert stats.written + stats.dropped_no_positive + stats.dev == 60
    # the dev files load as question files, regex answers kept
    trec_dev = load_questions(dev_dir / "curated-train.dev.jsonl")
    assert trec_dev and all(item.regex for item in trec_dev)
    # a rerun agrees; a different split over the same output is refused
    again = build_dpr_data([qa, trec], tiny_index, out, k=4, progress=False, dev_fraction=0.3, dev_dir=dev_dir)
    assert again.written == 0 and again.dev == stats.dev
    with pytest.raises(OdqaError, match="dev split"):
        build_dpr_data([qa, trec], tiny_index, out, k=4, progress=False, dev_fraction=0.6, dev_dir=dev_dir)
    with pytest.raises(OdqaError, match="dev_dir"):
        build_dpr_data([qa], tiny_index, tmp_path / "y.jsonl", k=4, progress=False, dev_fraction=0.1)


def test_builder_refuses_test_sets(tiny_index, tmp_path):
    path = tmp_path / "nq-test.qa.tsv"
    path.write_text("q\t['a']\n")
    with pytest.raises(OdqaError, match="test"):
        build_dpr_data([path], tiny_index, tmp_path / "x.jsonl", k=4, progress=False)


def test_reader_skips_bad_rows_with_counts(tmp_path, caplog):
    good = _example(0)
    rows = [
        json.dumps(good),
        "{not json",
        json.dumps({**good, "question": ""}),
        json.dumps({**good, "answers": "volcano"}),  # a string, not a list
        json.dumps({**good, "positive_ctxs": []}),
        json.dumps({k: v for k, v in good.items() if k != "positive_ctxs"}),
        json.dumps({**good, "positive_ctxs": [{"title": "x"}, {"title": "T", "text": "kept"}]}),  # one bad context
        json.dumps([1, 2]),
    ]
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join(rows) + "\n")
    stats = ReadStats()
    with caplog.at_level("WARNING"):
        examples = read_dpr_file(path, stats)
    assert len(examples) == 2 and stats.kept == 2 and stats.rows == 8 and stats.bad_contexts == 1
    assert stats.skipped == {
        "invalid JSON": 1,
        "missing question": 1,
        "answers not a list of strings": 1,
        "no positive context": 1,
        "missing positive_ctxs": 1,
        "not a JSON object": 1,
    }
    assert "mixed.jsonl:2: skipped: invalid JSON" in caplog.text


def test_reader_reads_dpr_published_json(tmp_path):
    data = [
        {
            "dataset": "nq_train",
            "question": "who got the first nobel prize in physics",
            "answers": ["Wilhelm Conrad Röntgen"],
            "positive_ctxs": [
                {
                    "title": "Nobel Prize",
                    "text": "... Röntgen ...",
                    "score": 1000,
                    "title_score": 1,
                    "passage_id": "628725",
                }
            ],
            "negative_ctxs": [{"title": "A", "text": "a", "score": 0, "title_score": 0, "passage_id": "1"}],
            "hard_negative_ctxs": [{"title": "B", "text": "b", "score": 9.1, "title_score": 0, "psg_id": 7}],
        },
        {"question": "no positives", "answers": ["x"], "positive_ctxs": [], "hard_negative_ctxs": []},
    ]
    path = tmp_path / "biencoder-nq-train.json"
    path.write_text(json.dumps(data, ensure_ascii=False))
    stats = ReadStats()
    examples = read_dpr_file(path, stats)
    assert len(examples) == 1 and stats.skipped == {"no positive context": 1}
    ex = examples[0]
    assert ex.positives[0]["passage_id"] == "628725" and ex.hard_negatives[0]["passage_id"] == "7"
    assert ex.negatives[0]["text"] == "a"


# ---------------------------------------------------------------------------------------------------- training


def _cfg(train_file, out, init, **kw):
    from odqa.retriever.training.train import RetrieverTrainConfig

    base = {
        "train_files": [str(train_file)],
        "output_dir": str(out),
        "init": str(init),
        "batch_size": 4,
        "lr": 1e-3,
        "warmup": 0.0,
        "max_steps": 6,
        "q_max_length": 16,
        "p_max_length": 24,
        "eval_every": 0,
        "save_every": 0,
        "progress": False,
        "device": "cpu",
        "precision": "fp32",
    }
    base.update(kw)
    return RetrieverTrainConfig(**base)


def test_gradient_cache_equals_full_batch(tmp_path, train_file):
    from contextlib import nullcontext

    from odqa.core.encoder import TextEncoder
    from odqa.retriever.training.train import DualEncoder, make_batch, train_step

    init = _tiny_encoder(tmp_path / "enc", dropout=0.0)
    examples = read_dpr_file(train_file)[:4]
    batch = make_batch(examples, 1, None)
    grads = []
    for chunk in (0, 3):
        model = DualEncoder(TextEncoder.from_pretrained(str(init), device="cpu"))
        model.train()
        loss = train_step(
            model, batch, _cfg(train_file, tmp_path / "o", init, chunk_size=chunk), torch.device("cpu"), nullcontext
        )
        grads.append((loss, torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])))
    assert grads[0][0] == pytest.approx(grads[1][0], abs=1e-5)
    assert torch.allclose(grads[0][1], grads[1][1], atol=1e-5)


def test_a_few_steps_lower_the_training_loss(tmp_path, train_file):
    from odqa.retriever.training.train import train

    init = _tiny_encoder(tmp_path / "enc")
    losses = []
    final = train(
        _cfg(train_file, tmp_path / "run", init, max_steps=30, chunk_size=3, holdout=4, eval_every=10),
        on_step=lambda s, loss: losses.append(loss),
    )
    assert len(losses) == 30
    assert sum(losses[-5:]) / 5 < sum(losses[:5]) / 5
    # the saved model is a TextEncoder folder, loadable as any encoder
    from odqa.core.encoder import TextEncoder

    enc = TextEncoder.from_pretrained(str(final), device="cpu")
    assert enc.encode(["tell me about the volcano"]).shape == (1, 32)
    # exported as fp16 weights that load (and compute) in fp32, giving the same vectors
    from odqa.retriever.training.train import export_encoder

    shipped = export_encoder(final, tmp_path / "shipped", card="# card\n")
    again = TextEncoder.from_pretrained(str(shipped), device="cpu")
    assert next(again.model.parameters()).dtype == torch.float32 and (shipped / "README.md").exists()
    assert (
        abs(
            float((again.encode(["tell me about the volcano"]) @ enc.encode(["tell me about the volcano"]).T)[0, 0]) - 1
        )
        < 1e-3
    )
    history = [json.loads(x) for x in (tmp_path / "run" / "val_history.jsonl").read_text().splitlines()]
    assert [h["step"] for h in history] == [0, 10, 20, 30] and history[0]["questions"] == 4
    # the pool view ranks every held-out context: at least each question's positive, at most all contexts
    held = read_dpr_file(tmp_path / "run" / "heldout.jsonl")
    assert 4 <= history[0]["pool_passages"] <= sum(len(e.positives) + len(e.hard_negatives) for e in held)
    assert all(0 <= h["pool_recall@1"] <= h["pool_recall@5"] <= h["pool_recall@20"] <= 100 for h in history)
    assert (tmp_path / "run" / "heldout.jsonl").exists()


def test_distillation_pulls_the_model_towards_its_teacher(tmp_path, train_file):
    from odqa.core.encoder import TextEncoder
    from odqa.retriever.training.train import train

    init = _tiny_encoder(tmp_path / "enc", dropout=0.0)
    probe = ["tell me about the volcano", "which river crosses the city"]

    def drift(final):
        start = TextEncoder.from_pretrained(str(init), device="cpu").encode(probe)
        end = TextEncoder.from_pretrained(str(final), device="cpu").encode(probe)
        return float(((start @ start.T) - (end @ end.T)).__abs__().sum())

    plain = train(_cfg(train_file, tmp_path / "plain", init, max_steps=12))
    held = train(_cfg(train_file, tmp_path / "held", init, max_steps=12, distill_weight=20.0))
    assert json.loads((held / "retriever_info.json").read_text())["config"]["distill_weight"] == 20.0
    # a strong pull towards the frozen starting encoder keeps its similarities closer to where they began
    assert drift(held) < drift(plain)


def test_checkpoint_resume_gives_the_same_model(tmp_path, train_file):
    from odqa.retriever.training.train import train

    init = _tiny_encoder(tmp_path / "enc")
    straight = train(_cfg(train_file, tmp_path / "a", init, max_steps=6, save_every=2))

    class Crash(Exception):
        pass

    def crash(step, loss):
        if step == 5:
            raise Crash()

    with pytest.raises(Crash):
        train(_cfg(train_file, tmp_path / "b", init, max_steps=6, save_every=2), on_step=crash)
    assert sorted(p.name for p in (tmp_path / "b").glob("checkpoint-*")) == ["checkpoint-2", "checkpoint-4"]
    resumed_steps = []
    resumed = train(
        _cfg(train_file, tmp_path / "b", init, max_steps=6, save_every=2),
        on_step=lambda s, loss: resumed_steps.append(s),
    )
    assert resumed_steps == [5, 6]
    from safetensors.torch import load_file

    a, b = load_file(straight / "model.safetensors"), load_file(resumed / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)


def test_checkpoint_of_another_architecture_is_refused(tmp_path, train_file):
    from odqa.retriever.training.train import train

    small = _tiny_encoder(tmp_path / "small", hidden=32)
    big = _tiny_encoder(tmp_path / "big", hidden=64)
    with pytest.raises(ZeroDivisionError):

        def stop(step, loss):
            if step == 2:
                raise ZeroDivisionError

        train(_cfg(train_file, tmp_path / "run", small, save_every=1), on_step=stop)
    with pytest.raises(OdqaError, match="another architecture"):
        train(_cfg(train_file, tmp_path / "run", big))
    with pytest.raises(OdqaError, match="shared"):
        train(_cfg(train_file, tmp_path / "run", small, shared=False))


def test_separate_encoders_save_both(tmp_path, train_file):
    from odqa.retriever.training.train import train

    init = _tiny_encoder(tmp_path / "enc")
    final = train(_cfg(train_file, tmp_path / "sep", init, shared=False, max_steps=2))
    assert (final / "question_encoder" / "config.json").exists() and (
        final / "passage_encoder" / "config.json"
    ).exists()


def test_training_survives_bad_rows(tmp_path, train_file):
    from odqa.retriever.training.train import train

    init = _tiny_encoder(tmp_path / "enc")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(train_file.read_text() + '{"question": "q", "answers": 3, "positive_ctxs": []}\n{oops\n')
    final = train(_cfg(bad, tmp_path / "r", init, max_steps=2))
    info = json.loads((final / "retriever_info.json").read_text())
    assert info["read"]["kept"] == 12 and sum(info["read"]["skipped"].values()) == 2


# ---------------------------------------------------------------------------------------------------- hybrid, CLI


def test_tune_hybrid_records_a_choice(tmp_path):
    from odqa.corpus.questions import QAItem
    from odqa.eval.tuning import tune_hybrid
    from odqa.indexes.folder import FolderIndex

    enc = _tiny_encoder(tmp_path / "enc")
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps(d) + "\n" for d in DOCS))
    build_index(IndexSpec(corpus=str(corpus), out=str(tmp_path / "idx"), backends=["bm25", "dense"], encoder=str(enc)))
    bundle = FolderIndex.open(tmp_path / "idx")
    items = [QAItem(str(i), q, a) for i, (q, a) in enumerate(QUESTIONS)]
    result = tune_hybrid(
        built_retriever(bundle, "dense"),
        built_retriever(bundle, "bm25"),
        items,
        alphas=[0.2, 0.8],
        candidates=6,
        ks=[1, 5],
        select="recall@5",
    )
    assert result["questions"] == 4 and len(result["settings"]) == 3
    assert result["best"]["method"] in ("rrf", "minmax")
    best = result["best_metrics"]
    assert best["recall@5"] == max(r["recall@5"] for r in result["settings"])
    # three questions have an answer-bearing passage, which BM25 finds in its top 5; the fourth has none
    assert result["bm25"]["recall@5"] == 75.0 and result["dense"]["questions"] == 4


def _fusion(backend, **settings) -> tuple:
    """(method, alpha, rrf_k) of the hybrid over `backend` with these retrieval settings."""
    from odqa.retriever.registry import hybrid_fusion
    from odqa.retriever.settings import RetrievalConfig

    fusion = hybrid_fusion(backend, RetrievalConfig(**settings))
    return fusion.method, fusion.alpha, fusion.rrf_k


def test_tune_hybrid_record_sets_what_auto_fuses_with(tmp_path, capsys):
    from odqa.cli import main
    from odqa.indexes.folder import FolderIndex

    enc = _tiny_encoder(tmp_path / "enc")
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps(d) + "\n" for d in DOCS))
    build_index(IndexSpec(corpus=str(corpus), out=str(tmp_path / "idx"), backends=["bm25", "dense"], encoder=str(enc)))
    assert _fusion(FolderIndex.open(tmp_path / "idx")) == ("rrf", 0.5, 60)  # English, untuned
    questions = tmp_path / "dev.tsv"
    questions.write_text("".join(f"{q}\t{json.dumps(a)}\n" for q, a in QUESTIONS))
    # alphas 0.2 and 0.8 only: whichever wins, the record differs from the untuned rrf / 0.5
    assert (
        main(
            [
                "tune-hybrid",
                "--index",
                str(tmp_path / "idx"),
                "--questions",
                str(questions),
                "--alphas",
                "0.2",
                "0.8",
                "--candidates",
                "6",
                "--k",
                "1",
                "5",
                "--select",
                "recall@5",
                "--record",
                "--json",
            ]
        )
        == 0
    )
    best = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["best"]
    bundle = FolderIndex.open(tmp_path / "idx")
    method, alpha, rrf_k = _fusion(bundle)
    assert method == best["method"] and (method == "rrf" or alpha == best["alpha"])
    assert _fusion(bundle, fusion="minmax", alpha=0.3) == ("minmax", 0.3, 60)  # a named method overrides the record
    assert bundle.verify()[-1].endswith("ok")  # raises if rewriting the manifest broke a recorded digest
    hybrid = built_retriever(bundle, "hybrid")
    assert (hybrid.fusion.method, hybrid.fusion.weights[0]) == (method, alpha)


def test_cli_build_and_train(tiny_index, qa_tsv, tmp_path, capsys):
    from odqa.cli import main

    data = tmp_path / "d.jsonl"
    assert (
        main(
            [
                "build-dpr-data",
                "--questions",
                str(qa_tsv),
                "--index",
                str(tiny_index),
                "--output",
                str(data),
                "--k",
                "4",
                "--no-progress",
                "--json",
            ]
        )
        == 0
    )
    last = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert last["written"] == 3 and last["dropped_no_positive"] == 1
    init = _tiny_encoder(tmp_path / "enc")
    assert (
        main(
            [
                "train-retriever",
                "--train",
                str(data),
                "--output",
                str(tmp_path / "m"),
                "--init",
                str(init),
                "--max-steps",
                "2",
                "--batch-size",
                "2",
                "--holdout",
                "1",
                "--q-max-length",
                "16",
                "--p-max-length",
                "32",
                "--device",
                "cpu",
                "--no-progress",
                "--json",
            ]
        )
        == 0
    )
    last = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert last["steps"] == 2 and last["validation"]["questions"] == 1
    assert (
        main(["eval-dpr", "--data", str(data), "--encoder", str(tmp_path / "m" / "final"), "--k", "1", "5", "--json"])
        == 0
    )
    last = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert last["results"][0]["questions"] == 3
    # a test set is refused with a one-line error, exit 2
    test_set = tmp_path / "nq-test.qa.tsv"
    test_set.write_text("q\t['a']\n")
    assert (
        main(
            [
                "build-dpr-data",
                "--questions",
                str(test_set),
                "--index",
                str(tiny_index),
                "--output",
                str(tmp_path / "t.jsonl"),
            ]
        )
        == 2
    )
    assert "test" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------------- interpolation


def test_interpolation_mixes_weights_and_refuses_other_architectures(tmp_path):
    from transformers import AutoModel

    from odqa.retriever.training.interpolate import interpolate_encoders

    base = _tiny_encoder(tmp_path / "base", seed=0)
    tuned = _tiny_encoder(tmp_path / "tuned", seed=1)
    states = {name: AutoModel.from_pretrained(str(tmp_path / name)).state_dict() for name in ("base", "tuned")}
    key = "encoder.layer.0.attention.self.query.weight"
    assert not torch.equal(states["base"][key], states["tuned"][key])
    for weight, expected in [
        (0.0, states["base"][key]),
        (1.0, states["tuned"][key]),
        (0.25, 0.75 * states["base"][key] + 0.25 * states["tuned"][key]),
    ]:
        out = interpolate_encoders(str(base), str(tuned), tmp_path / f"mix-{weight}", weight)
        mixed = AutoModel.from_pretrained(str(out)).state_dict()
        assert torch.allclose(mixed[key], expected, atol=1e-6)
        info = json.loads((out / "retriever_info.json").read_text())
        assert info["interpolation"]["weight"] == weight
    wider = _tiny_encoder(tmp_path / "wider", hidden=48)
    with pytest.raises(OdqaError, match="same architecture"):
        interpolate_encoders(str(base), str(wider), tmp_path / "bad")
    assert not (tmp_path / "bad").exists()
    with pytest.raises(OdqaError, match="weight"):
        interpolate_encoders(str(base), str(tuned), tmp_path / "bad", 1.5)


def test_pool_recall_counts_the_first_answer_bearing_passage():
    import numpy as np

    from odqa.retriever.training.train import pool_recall
    from odqa.retriever.training.train_data import DPRExample

    texts = ["Paris is the capital of France.", "Lyon is a city.", "Berlin is the capital of Germany."]
    p = np.eye(3, dtype=np.float32)
    # question 1 ranks Lyon, Paris, Berlin; question 2 ranks Paris, Lyon, Berlin (its answer is third)
    q = np.array([[0.5, 0.9, 0.1], [0.9, 0.5, 0.1]], dtype=np.float32)
    examples = [
        DPRExample(question="capital of france", answers=["Paris"], positives=[], hard_negatives=[]),
        DPRExample(question="capital of germany", answers=["Berlin"], positives=[], hard_negatives=[]),
    ]
    m = pool_recall(q, p, texts, examples, (1, 2, 3))
    assert m == {"recall@1": 0.0, "recall@2": 50.0, "recall@3": 100.0, "mrr@3": round((1 / 2 + 1 / 3) / 2, 4)}


# ---------------------------------------------------------------------------------------------------- mined negatives


def test_pick_negatives_refuses_answers_positives_and_known_negatives():
    from odqa.retriever.training.mine_negatives import MineStats, pick_negatives
    from odqa.retriever.training.train_data import DPRExample

    gold = "K2 is the second highest mountain on Earth, in the Karakoram range, first climbed in 1954."
    ex = DPRExample(
        "which mountain is second highest",
        ["K2"],
        [{"title": "K2", "text": gold, "passage_id": "g"}],
        [{"title": "Alps", "text": "Mont Blanc is the highest mountain of the Alps.", "passage_id": "n"}],
    )
    ranked = [
        ("K2", "in the Karakoram range, first climbed in 1954."),  # a piece of the gold paragraph
        ("Karakoram", "The Karakoram holds K2 and other peaks."),  # holds the answer
        ("Alps", "Mont Blanc is the highest  mountain of the Alps."),  # already a negative (spacing differs)
        ("Everest", "Mount Everest is the highest mountain on Earth."),
        ("Lhotse", "Lhotse is the fourth highest mountain."),
        ("Makalu", "Makalu is the fifth highest mountain."),
    ]
    stats = MineStats()
    mined = pick_negatives(ex, ranked, per_question=2, skip_top=0, stats=stats)
    assert [m["title"] for m in mined] == ["Everest", "Lhotse"]
    assert (stats.refused_positive, stats.refused_answer) == (1, 1)
    assert [m["title"] for m in pick_negatives(ex, ranked, per_question=2, skip_top=1)] == ["Lhotse", "Makalu"]


def test_mine_negatives_appends_after_bm25_negatives_and_leaves_out_excluded(tmp_path):
    from odqa.retriever.training.mine_negatives import mine_dense_negatives

    rows = [
        {
            "id": str(i),
            "question": q,
            "answers": a,
            "positive_ctxs": [{"title": d["title"], "text": d["text"], "passage_id": d["id"]}],
            "hard_negative_ctxs": [{"title": n["title"], "text": n["text"], "passage_id": n["id"]}],
        }
        for i, (q, a, d, n) in enumerate(
            [
                (QUESTIONS[0][0], QUESTIONS[0][1], DOCS[0], DOCS[1]),
                (QUESTIONS[1][0], QUESTIONS[1][1], DOCS[4], DOCS[3]),
                (QUESTIONS[2][0], QUESTIONS[2][1], DOCS[5], DOCS[2]),
            ]
        )
    ]
    train = tmp_path / "train.jsonl"
    train.write_text("".join(json.dumps(r) + "\n" for r in rows))
    held = tmp_path / "held.jsonl"
    held.write_text(json.dumps(rows[2]) + "\n")
    out = tmp_path / "mined.jsonl"
    stats = mine_dense_negatives(train, out, encoder="minilm", per_question=1, depth=4, exclude=held, progress=False)
    mined = read_dpr_file(out)
    assert [e.id for e in mined] == ["0", "1"] and stats.pool == 4  # question 2 and its two passages left out
    for ex, row in zip(mined, rows):
        assert ex.hard_negatives[0]["text"] == row["hard_negative_ctxs"][0]["text"]  # BM25 negative stays first
        assert len(ex.hard_negatives) == 2
        new = ex.hard_negatives[1]["text"]
        assert new != row["positive_ctxs"][0]["text"] and new != row["hard_negative_ctxs"][0]["text"]
        assert not any(a.lower() in new.lower() for a in ex.answers)
    with pytest.raises(OdqaError, match="per_question"):
        mine_dense_negatives(train, tmp_path / "x.jsonl", encoder="minilm", per_question=0)
