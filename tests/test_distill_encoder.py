"""Issue 23: a shallower passage encoder distilled from the index's encoder (`run_qa.py distill-encoder`); its
index is searched with the teacher's questions."""

import json

import numpy as np
import pytest
import torch

from odqa.cli import main
from odqa.core.encoder import TextEncoder
from odqa.core.errors import OdqaError
from odqa.indexes.folder import FolderIndex
from odqa.indexing import IndexSpec, build_index
from odqa.retriever.training.distill_encoder import RecallCheck, distill_passage_encoder, keep_layers, sample_passages
from odqa.retriever.training.probe_loss import probe_weighted_loss, question_second_moment
from odqa.retriever.training.train_config import EncoderDistillConfig
from tests.retrievers import built_retriever

TOPICS = ["rivers", "volcanoes", "painters", "chemistry", "football", "railways", "opera", "bridges"]
DOCS = [
    {
        "id": str(i),
        "title": f"{TOPICS[i % 8].title()} {i}",
        "text": f"Passage {i} is about {TOPICS[i % 8]}: {TOPICS[(i * 3) % 8]} and {TOPICS[(i * 5) % 8]} come up "
        f"too, in a text of about twenty words numbered {i}.",
    }
    for i in range(48)
]


@pytest.fixture(scope="module")
def store_index(bm25_index_of):
    return bm25_index_of(DOCS, "distill")


def test_keep_layers_keeps_the_named_blocks_in_order_and_refuses_others():
    teacher = TextEncoder.from_pretrained("retriever", device="cpu")
    blocks = list(teacher.model.encoder.layer)
    student = keep_layers(TextEncoder.from_pretrained("retriever", device="cpu"), [0, 4, 5])
    assert student.model.config.num_hidden_layers == 3
    kept = student.model.encoder.layer
    assert all(torch_equal(kept[i], blocks[j]) for i, j in enumerate([0, 4, 5]))
    for bad in ([6], [1, 1], []):
        with pytest.raises(OdqaError, match="distinct layer numbers from 0 to 5"):
            keep_layers(TextEncoder.from_pretrained("retriever", device="cpu"), bad)


def torch_equal(a, b) -> bool:
    return all(
        np.array_equal(x.detach().numpy(), y.detach().numpy())
        for x, y in zip(a.state_dict().values(), b.state_dict().values())
    )


def test_sample_leaves_out_the_excluded_articles(store_index, tmp_path):
    squad = tmp_path / "dev.json"
    squad.write_text(
        json.dumps(
            {
                "version": "1.1",
                "data": [{"title": "Rivers_0", "paragraphs": []}, {"title": "Opera 6", "paragraphs": []}],
            }
        )
    )
    drawn = sample_passages(store_index, 100, [squad], seed=3)
    titles = {title for title, _ in drawn}
    assert len(drawn) == len(DOCS) - 2 and "Rivers 0" not in titles and "Opera 6" not in titles
    assert drawn == sample_passages(store_index, 100, [squad], seed=3)  # seeded
    assert sample_passages(store_index, 5, seed=3) != sample_passages(store_index, 5, seed=4)


def test_distilled_student_moves_towards_the_teacher_and_serves_an_index(store_index, tmp_path):
    out = tmp_path / "student"
    cfg = EncoderDistillConfig(
        index=str(store_index),
        output_dir=str(out),
        passages=32,
        holdout=8,
        batch_size=8,
        max_steps=12,
        max_length=48,
        lr=2e-4,
        warmup=0.0,
        save_every=6,
        progress=False,
    )
    final = distill_passage_encoder(cfg)
    history = [json.loads(line) for line in (out / "val_history.jsonl").read_text().splitlines()]
    assert [h["step"] for h in history] == [0, 12]
    assert history[-1]["cosine_mean"] > history[0]["cosine_mean"] + 0.01
    info = json.loads((final / "retriever_info.json").read_text())
    assert info["query_encoder"] == "retriever" and info["layers"] == [0, 4, 5] and info["steps"] == 12
    student = TextEncoder.from_pretrained(str(final), device="cpu")
    assert student.model.config.num_hidden_layers == 3 and student.normalize

    # an index built by the student is searched with the teacher's question vectors
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(d) + "\n" for d in DOCS[:10]))
    build_index(
        IndexSpec(corpus=str(corpus), out=str(tmp_path / "dense"), backends=["dense"], encoder=str(final), device="cpu")
    )  # no --query-encoder: the student names its teacher
    dense = built_retriever(FolderIndex.open(tmp_path / "dense"), "dense", device="cpu")
    assert dense.encoder.name == "retriever"
    manifest = json.loads((tmp_path / "dense" / "dense" / "manifest.json").read_text())
    assert manifest["encoder"] == str(final) and manifest["params"]["query_encoder"] == "retriever"
    assert dense.search(["Which passage is about volcanoes?"], 3)[0]

    # a rerun with more steps resumes from the newest checkpoint instead of starting over
    more = EncoderDistillConfig(**{**cfg.to_dict(), "max_steps": 14})
    distill_passage_encoder(more)
    history = [json.loads(line) for line in (out / "val_history.jsonl").read_text().splitlines()]
    assert [h["step"] for h in history] == [0, 12, 14]

    # --init goes on training the first student (its 3 layers, not a new cut of the teacher's)
    again = EncoderDistillConfig(
        **{
            **cfg.to_dict(),
            "output_dir": str(tmp_path / "again"),
            "init": str(final),
            "layers": [1, 2],
            "max_steps": 4,
            "seed": 7,
        }
    )
    second = distill_passage_encoder(again)
    history = [json.loads(line) for line in (tmp_path / "again" / "val_history.jsonl").read_text().splitlines()]
    assert (
        history[0]["cosine_mean"] > json.loads((out / "val_history.jsonl").read_text().splitlines()[0])["cosine_mean"]
    )
    assert TextEncoder.from_pretrained(str(second), device="cpu").model.config.num_hidden_layers == 3
    assert json.loads((second / "retriever_info.json").read_text())["layers"] == [0, 4, 5]


def test_distill_command_names_a_bad_layer_in_one_line(store_index, tmp_path, capsys):
    code = main(
        [
            "distill-encoder",
            "--index",
            str(store_index),
            "--output",
            str(tmp_path / "s"),
            "--layers",
            "0",
            "9",
            "--passages",
            "16",
            "--holdout",
            "0",
            "--batch-size",
            "8",
            "--no-progress",
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "--layers 0 9" in err[0]


def _unit(rows) -> torch.Tensor:
    return torch.nn.functional.normalize(torch.tensor(rows, dtype=torch.float32), dim=-1)


def test_probe_weighted_loss_counts_the_error_that_probe_questions_read():
    teacher = _unit([[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]])
    student = _unit([[1.0, 0.0, 0.3, 0.0], [0.0, 1.0, 0.0, 0.3]])  # both off towards a third/fourth direction
    cosine = float((1 - (student * teacher).sum(-1)).mean())
    isotropic = torch.eye(4) / 4
    # with no preferred direction every weight gives the plain cosine loss
    for weight in (0.0, 0.5, 1.0):
        assert float(probe_weighted_loss(student, teacher, isotropic, weight)) == pytest.approx(cosine, rel=1e-5)
    assert float(probe_weighted_loss(student, teacher, None, 0.7)) == pytest.approx(cosine, rel=1e-6)
    # questions that look only along the 3rd direction: the 1st passage's error is read, the 2nd's is not
    probes = question_second_moment(torch.tensor([[0.0, 0.0, 2.0, 0.0]] * 5))
    assert float(torch.trace(probes)) == pytest.approx(1.0)
    first = float(probe_weighted_loss(student[:1], teacher[:1], probes, 1.0))
    second = float(probe_weighted_loss(student[1:], teacher[1:], probes, 1.0))
    assert first > 3 * cosine and second < 1e-6
    with pytest.raises(ValueError, match="non-empty"):
        question_second_moment(torch.zeros(0, 4))


def test_passages_are_sampled_from_a_corpus_file_as_from_an_index(tmp_path):
    corpus = tmp_path / "passages.tsv"
    corpus.write_text("id\ttext\ttitle\n" + "".join(f"{d['id']}\t{d['text']}\t{d['title']}\n" for d in DOCS))
    squad = tmp_path / "dev.json"
    squad.write_text(json.dumps({"version": "1.1", "data": [{"title": "Rivers_0", "paragraphs": []}]}))
    everything = sample_passages(corpus, 100, [squad], seed=3)
    assert len(everything) == len(DOCS) - 1 and "Rivers 0" not in {title for title, _ in everything}
    drawn = sample_passages(corpus, 10, seed=5)
    assert len(drawn) == 10 and len(set(drawn)) == 10 and drawn == sample_passages(corpus, 10, seed=5)
    assert set(drawn) <= {(d["title"], d["text"]) for d in DOCS}
    # a uniform draw: over seeds, passages from the end of the file are drawn as often as from the start
    counts = np.zeros(len(DOCS))
    for seed in range(40):
        for title, _ in sample_passages(corpus, 12, seed=seed):
            counts[int(title.split()[-1])] += 1
    assert counts[:24].sum() == pytest.approx(counts[24:].sum(), rel=0.25)
    with pytest.raises(OdqaError, match="neither an index folder nor a corpus"):
        sample_passages(tmp_path / "missing", 5)


def test_a_damaged_index_folder_is_named_not_read_as_a_corpus(store_index, tmp_path):
    import shutil

    damaged = tmp_path / "index"
    shutil.copytree(store_index, damaged)
    (damaged / "manifest.json").unlink()
    with pytest.raises(OdqaError) as caught:
        sample_passages(damaged, 5)
    assert "manifest" in str(caught.value).lower() or "damaged" in str(caught.value).lower()


def test_recall_check_ranks_gold_paragraphs_among_distractors(tmp_path):
    squad = tmp_path / "tuning-dev.json"
    paragraphs = [
        {
            "context": d["text"],
            "qas": [
                {
                    "id": d["id"],
                    "question": f"Which passage is numbered {d['id']}?",
                    "answers": [{"text": d["id"], "answer_start": 0}],
                }
            ],
        }
        for d in DOCS[:6]
    ]
    squad.write_text(json.dumps({"version": "1.1", "data": [{"title": "Numbers", "paragraphs": paragraphs}]}))
    teacher = TextEncoder.from_pretrained("retriever", device="cpu").eval()
    check = RecallCheck(teacher, squad, [(d["title"], d["text"]) for d in DOCS[6:30]], max_length=48)
    report = check.report(teacher)
    assert report["questions"] == 6 and report["passages"] == 30
    assert report["student"] == report["teacher"]  # the teacher as its own student
    assert report["teacher"]["recall@20"] >= report["teacher"]["recall@5"] >= report["teacher"]["recall@1"]
    scrambled = keep_layers(TextEncoder.from_pretrained("retriever", device="cpu"), [5]).eval()
    assert check.report(scrambled)["student"]["recall@1"] <= report["teacher"]["recall@1"]
    test_set = tmp_path / "dev-v1.1.json"
    test_set.write_text(squad.read_text())
    with pytest.raises(Exception, match="reports as a test"):
        RecallCheck(teacher, test_set, [], max_length=48)


def test_distill_command_takes_probe_questions_and_reports_recall(tmp_path, capsys):
    corpus = tmp_path / "docs.jsonl"
    corpus.write_text("".join(json.dumps(d) + "\n" for d in DOCS))
    probes = tmp_path / "probes.jsonl"
    probes.write_text("".join(json.dumps({"question": f"What is said about {t}?"}) + "\n" for t in TOPICS))
    squad = tmp_path / "tuning-dev.json"
    squad.write_text(
        json.dumps(
            {
                "version": "1.1",
                "data": [
                    {
                        "title": "Numbers",
                        "paragraphs": [
                            {
                                "context": DOCS[0]["text"],
                                "qas": [
                                    {
                                        "id": "q",
                                        "question": "What is passage 0 about?",
                                        "answers": [{"text": "rivers", "answer_start": 0}],
                                    }
                                ],
                            }
                        ],
                    }
                ],
            }
        )
    )
    code = main(
        [
            "distill-encoder",
            "--index",
            str(corpus),
            "--output",
            str(tmp_path / "s"),
            "--layers",
            "0",
            "5",
            "--passages",
            "16",
            "--holdout",
            "8",
            "--batch-size",
            "8",
            "--max-steps",
            "2",
            "--max-length",
            "48",
            "--questions",
            str(probes),
            "--question-weight",
            "0.5",
            "--recall-eval",
            str(squad),
            "--no-progress",
            "--json",
        ]
    )
    last = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 0 and last["steps"] == 2
    assert set(last["heldout"]["recall"]["student"]) == {"recall@1", "recall@5", "recall@20"}
    assert last["heldout"]["recall"]["questions"] == 1 and last["heldout"]["recall"]["passages"] == 9
    config = json.loads((tmp_path / "s" / "final" / "retriever_info.json").read_text())["config"]
    assert config["questions"] == [str(probes)] and config["question_weight"] == 0.5
