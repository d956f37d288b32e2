"""Reader training on a tiny model: span labels, skipped bad offsets, checkpoints, resume = uninterrupted run."""

from __future__ import annotations

import json

import pytest
import torch

from odqa.core.errors import OdqaError
from odqa.reader.training.train import LoadStats, TrainConfig, build_features, load_squad_examples, train
from tests.reader_fixtures import minilm_tokenizer, save_tiny_qa

CTX = "Marie Curie was a physicist and chemist. She won the Nobel Prize in Physics in 1903."


def _squad(path, n=6):
    qas = []
    for i in range(n):
        qas.append(
            {
                "id": f"a{i}",
                "question": f"Who won the prize {i}?",
                "answers": [{"text": "Marie Curie", "answer_start": 0}],
            }
        )
    qas.append({"id": "bad", "question": "When?", "answers": [{"text": "1903", "answer_start": 3}]})  # wrong offset
    qas.append({"id": "neg", "question": "Who won in 1950?", "is_impossible": True, "answers": []})
    path.write_text(json.dumps({"data": [{"title": "Curie", "paragraphs": [{"context": CTX, "qas": qas}]}]}))
    return path


def test_bad_offsets_are_counted_and_skipped(tmp_path, caplog):
    stats = LoadStats()
    ex = load_squad_examples(_squad(tmp_path / "t.json"), stats=stats)
    assert stats.skipped_bad_offset == 1 and stats.skipped_examples == ["bad"]
    assert stats.answerable == 6 and stats.unanswerable == 1 and len(ex) == 7
    assert "answer text not found at its answer_start" in caplog.text


def test_limit_counts_the_questions_of_each_file(tmp_path):
    stats = LoadStats()
    first = load_squad_examples(_squad(tmp_path / "a.json"), limit=3, stats=stats)
    second = load_squad_examples(_squad(tmp_path / "b.json"), limit=3, stats=stats)
    assert len(first) == len(second) == 3 and stats.questions == 6


def test_labels_point_at_the_answer_tokens_or_cls(tmp_path):
    tok = minilm_tokenizer()
    ex = load_squad_examples(_squad(tmp_path / "t.json"))
    cfg = TrainConfig(train_files=[], output_dir=str(tmp_path))
    feats = build_features(tok, ex, cfg)
    s, e = feats["start"][0], feats["end"][0]
    assert tok.decode(feats["input_ids"][0][s : e + 1]) == "marie curie"
    assert (feats["start"][-1], feats["end"][-1]) == (0, 0)  # unanswerable -> [CLS]


def test_all_answers_gives_one_example_per_distinct_reference_span(tmp_path):
    refs = [
        {"text": "Marie Curie", "answer_start": 0},
        {"text": "Curie", "answer_start": 6},
        {"text": "Marie Curie", "answer_start": 0},
        {"text": "Curie", "answer_start": 2},
    ]  # dup; bad offset
    qa = {"id": "q", "question": "Who was a physicist?", "answers": refs}
    path = tmp_path / "m.json"
    path.write_text(json.dumps({"data": [{"title": "Curie", "paragraphs": [{"context": CTX, "qas": [qa]}]}]}))
    first = load_squad_examples(path)
    assert [(e.start_char, e.end_char) for e in first] == [(0, 11)]
    stats = LoadStats()
    every = load_squad_examples(path, all_answers=True, stats=stats)
    assert [CTX[e.start_char : e.end_char] for e in every] == ["Marie Curie", "Curie"]
    assert stats.answerable == 1 and stats.skipped_bad_offset == 0


def test_not_squad_json_is_an_error(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text("[1, 2]")
    with pytest.raises(OdqaError):
        load_squad_examples(bad)


def test_training_refuses_a_test_set_before_loading_anything(tmp_path):
    dev = tmp_path / "dev-v1.1.json"  # SQuAD v1.1 dev: every reader is measured on it
    dev.write_text(json.dumps({"data": []}))
    with pytest.raises(OdqaError, match="SQuAD v1.1 dev"):
        train(TrainConfig(train_files=[str(dev)], output_dir=str(tmp_path / "run"), init="no-such-model"))
    assert not (tmp_path / "run").exists()


def _weights(path):
    from safetensors.torch import load_file

    return load_file(str(path / "model.safetensors"))


def test_resumed_training_equals_an_uninterrupted_run(tmp_path):
    torch.set_num_threads(1)
    init = save_tiny_qa(tmp_path / "init")
    data = _squad(tmp_path / "t.json")
    base = {
        "train_files": [str(data)],
        "init": str(init),
        "batch_size": 2,
        "max_steps": 4,
        "save_every": 2,
        "lr": 1e-3,
        "warmup": 0.0,
        "progress": False,
        "max_length": 64,
        "stride": 16,
        "seed": 7,
    }
    full = train(TrainConfig(output_dir=str(tmp_path / "full"), **base))

    class Stop(Exception):
        pass

    def stop_after_3(step, loss):
        if step == 3:
            raise Stop

    with pytest.raises(Stop):
        train(TrainConfig(output_dir=str(tmp_path / "cut"), **base), on_step=stop_after_3)
    assert (tmp_path / "cut" / "checkpoint-2" / "trainer_state.pt").exists()
    resumed = train(TrainConfig(output_dir=str(tmp_path / "cut"), **base))
    a, b = _weights(full), _weights(resumed)
    assert a.keys() == b.keys()
    for k in a:
        assert torch.allclose(a[k], b[k], atol=1e-6), k
    info = json.loads((resumed / "train_info.json").read_text())
    assert info["skipped_bad_offset"] == 1 and info["steps"] == 4


def test_a_time_budget_ends_training_with_the_model_reached_and_says_so(tmp_path):
    torch.set_num_threads(1)
    init = save_tiny_qa(tmp_path / "init")
    cfg = TrainConfig(
        train_files=[str(_squad(tmp_path / "t.json"))],
        output_dir=str(tmp_path / "run"),
        init=str(init),
        batch_size=2,
        max_steps=4,
        lr=1e-3,
        progress=False,
        max_length=64,
        stride=16,
        max_minutes=1e-6,
    )  # spent by the first step
    final = train(cfg)
    info = json.loads((final / "train_info.json").read_text())
    assert (info["steps"], info["planned_steps"], info["stopped_by"]) == (1, 4, "time budget")
    assert _weights(final).keys() == _weights(init).keys()


def test_a_layer_reduced_student_with_frozen_embeddings(tmp_path):
    """--keep-layers keeps the named layers of --init (their weights as they were); --freeze-embeddings leaves the
    vocabulary as --init has it while the rest trains."""
    from transformers import AutoConfig

    torch.set_num_threads(1)
    init = save_tiny_qa(tmp_path / "init")
    depth = AutoConfig.from_pretrained(str(init)).num_hidden_layers
    cfg = TrainConfig(
        train_files=[str(_squad(tmp_path / "t.json"))],
        output_dir=str(tmp_path / "run"),
        init=str(init),
        batch_size=2,
        max_steps=2,
        lr=1e-2,
        warmup=0.0,
        progress=False,
        max_length=64,
        stride=16,
        keep_layers=str(depth - 1),
        freeze_embeddings=True,
    )
    final = train(cfg)
    assert AutoConfig.from_pretrained(str(final)).num_hidden_layers == 1
    before, after = _weights(init), _weights(final)
    word = next(k for k in after if k.endswith("word_embeddings.weight"))
    assert torch.equal(before[word], after[word])
    last = f".layer.{depth - 1}."
    trained_layer = [k for k in after if ".layer.0." in k]
    assert trained_layer and any(not torch.equal(after[k], before[k.replace(".layer.0.", last)]) for k in trained_layer)
    assert not any(f".layer.{i}." in k for k in after for i in range(1, depth))


def test_bad_layer_lists_are_refused(tmp_path):
    init = save_tiny_qa(tmp_path / "init")
    for spec in ("0,x", "2,1", "0,99"):
        cfg = TrainConfig(
            train_files=[str(_squad(tmp_path / "t.json"))],
            output_dir=str(tmp_path / spec),
            init=str(init),
            max_steps=1,
            progress=False,
            keep_layers=spec,
        )
        with pytest.raises(OdqaError, match="keep-layers"):
            train(cfg)


def test_question_batches_keep_each_questions_windows_together():
    from odqa.reader.training.train import question_batches

    groups = [f"q{i // 3}" for i in range(30)] + ["big"] * 7  # ten questions of 3 windows, one of 7
    lengths = [10 + (i * 7) % 50 for i in range(len(groups))]
    batches = question_batches(groups, lengths, batch_size=5, seed=3, epoch=0)
    assert sorted(i for b in batches for i in b) == list(range(len(groups)))
    home = {groups[i]: n for n, b in enumerate(batches) for i in b}
    assert all(home[groups[i]] == n for n, b in enumerate(batches) for i in b)
    assert all(len(b) <= 5 for b in batches if groups[b[0]] != "big") and [7] == [len(b) for b in batches if len(b) > 5]
    assert batches == question_batches(groups, lengths, batch_size=5, seed=3, epoch=0)
    assert batches != question_batches(groups, lengths, batch_size=5, seed=3, epoch=1)


def test_shared_norm_loss_is_one_softmax_over_all_windows_of_a_question():
    from odqa.reader.training.train import shared_norm_loss

    torch.manual_seed(0)
    start, end = torch.randn(3, 6, requires_grad=True), torch.randn(3, 6)
    mask = torch.tensor([[1] * 6, [1] * 6, [1] * 4 + [0] * 2])
    # question 0: windows 0 (answer at tokens 2-3) and 1 (no answer); question 1: window 2, no answer anywhere
    starts, ends = torch.tensor([2, 0, 0]), torch.tensor([3, 0, 0])
    loss = shared_norm_loss(start, end, mask, starts, ends, [0, 0, 1])

    def tokens(t):  # [CLS] excluded, padding only in the unanswered question
        return torch.cat([t[0, 1:], t[1, 1:]])

    want = ((torch.logsumexp(tokens(start), 0) - start[0, 2]) + (torch.logsumexp(tokens(end), 0) - end[0, 3])) / 2
    assert torch.allclose(loss, want)
    loss.backward()  # the other passage's tokens are pushed down, the unanswered question is left alone
    assert (start.grad[1, 1:] > 0).all() and start.grad[0, 2] < 0 and (start.grad[2] == 0).all()
    none = shared_norm_loss(
        start, end, mask, torch.zeros(3, dtype=torch.long), torch.zeros(3, dtype=torch.long), [0, 0, 1]
    )
    assert float(none.detach()) == 0.0


def test_selection_loss_ranks_answer_holding_windows_by_their_null_scores():
    from odqa.reader.training.train import selection_loss

    start = torch.tensor([[1.0, 0, 0], [0.5, 0, 0], [2.0, 0, 0], [0.0, 0, 0]], requires_grad=True)
    end = torch.tensor([[0.5, 0, 0], [0.5, 0, 0], [0.0, 0, 0], [0.0, 0, 0]])
    # question 0: window 0 holds the answer, window 1 does not; question 1 (windows 2, 3) has no answer anywhere
    starts = torch.tensor([1, 0, 0, 0])
    loss = selection_loss(start, end, starts, [0, 0, 1, 1])
    selection = torch.tensor([-1.5, -1.0])  # minus (start + end) at [CLS]
    assert torch.allclose(loss, torch.logsumexp(selection, 0) - selection[0])
    loss.backward()  # the answer window's null is pushed down, the other's up, the unanswered question untouched
    assert start.grad[0, 0] > 0 and start.grad[1, 0] < 0 and (start.grad[2:] == 0).all()
    assert float(selection_loss(start, end, torch.zeros(4, dtype=torch.long), [0, 0, 1, 1]).detach()) == 0.0


def test_selection_loss_needs_shared_norm(tmp_path):
    cfg = TrainConfig(
        train_files=[str(_squad(tmp_path / "t.json"))],
        output_dir=str(tmp_path / "run"),
        init=str(save_tiny_qa(tmp_path / "init")),
        max_steps=1,
        progress=False,
        selection_loss=1.0,
    )
    with pytest.raises(OdqaError, match="--shared-norm"):
        train(cfg)


def test_shared_norm_training_drops_unanswered_questions_whole_and_trains(tmp_path):
    from odqa.reader.training.train import Example, drop_unanswered_questions

    examples = [Example("a1", "qa", "x", 0, 1, "qa"), Example("a2", "qa", "y", group="qa")]
    examples += [Example(f"n{i}", f"q{i}", "z", group=f"q{i}") for i in range(200)]
    kept, dropped = drop_unanswered_questions(examples, 0.25, seed=1)
    assert [e.id for e in kept[:2]] == ["a1", "a2"] and 20 < len(kept) - 2 < 80 and dropped == 202 - len(kept)

    torch.set_num_threads(1)
    init = save_tiny_qa(tmp_path / "init")
    cfg = TrainConfig(
        train_files=[str(_squad(tmp_path / "t.json"))],
        output_dir=str(tmp_path / "run"),
        init=str(init),
        batch_size=2,
        max_steps=3,
        lr=1e-3,
        warmup=0.0,
        progress=False,
        max_length=64,
        stride=16,
        shared_norm=1.0,
        selection_loss=1.0,
    )
    info = json.loads((train(cfg) / "train_info.json").read_text())
    assert info["steps"] == 3 and info["config"]["shared_norm"] == 1.0 and info["config"]["selection_loss"] == 1.0


def _xlmr_teacher(path, seed: int = 0):
    """A tiny randomly initialised QA model with another vocabulary and special tokens (the multilingual
    encoder's XLM-R tokenizer: no token_type_ids, `<s>`/`</s></s>` instead of [CLS]/[SEP])."""
    from transformers import AutoTokenizer, BertForQuestionAnswering

    from tests.reader_fixtures import tiny_config

    tok = AutoTokenizer.from_pretrained("models/encoder-multilingual")
    torch.manual_seed(seed)
    BertForQuestionAnswering(tiny_config(len(tok))).save_pretrained(str(path))
    tok.save_pretrained(str(path))
    return path, tok


def test_teacher_windows_align_by_characters_across_vocabularies():
    from transformers import AutoTokenizer

    from odqa.reader.training.train import Example

    student = minilm_tokenizer()
    teacher = AutoTokenizer.from_pretrained("models/encoder-multilingual")
    context = ("Pierre Curie worked in Paris with his wife. " * 12) + CTX + (" Later years brought more prizes." * 10)
    start = context.index("Nobel Prize")
    examples = [Example("q", "Which prize did Marie Curie win?", context, start, start + len("Nobel Prize"))]
    cfg = TrainConfig(train_files=[], output_dir="unused", max_length=64, stride=16)
    feats = build_features(student, examples, cfg, teacher_tokenizer=teacher)
    assert len(feats["input_ids"]) > 3  # the passage spans several windows, each aligned on its own slice
    answered = [i for i, s in enumerate(feats["start"]) if s > 0]
    assert answered
    for i in answered:
        t_start = feats["teacher_start_map"][i][feats["start"][i]]
        t_end = feats["teacher_end_map"][i][feats["end"][i]]
        pieces = teacher.convert_ids_to_tokens(feats["teacher_ids"][i])
        assert teacher.convert_tokens_to_string(pieces[t_start : t_end + 1]).strip() == "Nobel Prize"
    for i in range(len(feats["input_ids"])):
        start_map, end_map = feats["teacher_start_map"][i], feats["teacher_end_map"][i]
        assert start_map[0] == end_map[0] == 0  # the null span maps to the teacher's null span
        question = feats["input_ids"][i].index(student.sep_token_id)
        assert all(m == -1 for m in start_map[1 : question + 1])  # question tokens and [SEP] have no counterpart
        # every passage token that begins a word has a teacher token beginning at the same character
        words = [
            j
            for j, t in enumerate(student.convert_ids_to_tokens(feats["input_ids"][i]))
            if j > question and not t.startswith("##") and t != "[SEP]" and t.isalpha()
        ]
        assert words and all(start_map[j] >= 0 for j in words)


def test_distill_loss_pulls_the_student_to_the_teacher_and_ignores_unmatched_tokens():
    from odqa.reader.training.train import distill_loss, teacher_logits_on_student_tokens

    torch.manual_seed(0)
    teacher = torch.randn(2, 7)
    position_map = torch.tensor([[0, -1, 1, 2, 3, 4, 5], [0, -1, 1, 2, 3, -1, -1]])
    mask = torch.tensor([[1] * 7, [1] * 5 + [0] * 2])
    t = teacher_logits_on_student_tokens(teacher, position_map)
    assert torch.isinf(t[0, 1]) and t[0, 2] == teacher[0, 1]
    same = t.masked_fill(torch.isinf(t), -30.0)
    assert float(distill_loss(same, same, t, t, mask, 1.0)) < 1e-6
    student = torch.zeros(2, 7, requires_grad=True)
    loss = distill_loss(student, student, t, t, mask, 2.0)
    assert float(loss.detach()) > 0
    loss.backward()
    assert student.grad[0, 1] > 0  # no teacher token there: the student's mass is pushed down
    assert (student.grad[1, 5:] == 0).all()  # padding takes no part
    assert float(distill_loss(student - 0.5 * student.grad, student - 0.5 * student.grad, t, t, mask, 2.0)) < float(
        loss
    )


def test_distill_loss_over_a_questions_windows_is_one_softmax():
    from odqa.reader.training.train import _kl, distill_loss

    torch.manual_seed(1)
    student, teacher = torch.randn(3, 5), torch.randn(3, 5)
    mask = torch.ones(3, 5, dtype=torch.long)
    windows_only = distill_loss(student, student, teacher, teacher, mask, 1.0)
    grouped = distill_loss(student, student, teacher, teacher, mask, 1.0, groups=[0, 0, 1])

    def inside(x, rows):  # [CLS] excluded from the question's softmax
        return x[rows, 1:].reshape(-1)

    by_question = (
        _kl(inside(teacher, [0, 1]), inside(student, [0, 1])) + _kl(inside(teacher, [2]), inside(student, [2]))
    ) / 2
    assert torch.allclose(grouped, (windows_only + by_question) / 2, atol=1e-6)


def test_training_with_a_teacher_of_another_vocabulary(tmp_path):
    from odqa.reader.training.train import collate

    torch.set_num_threads(1)
    init = save_tiny_qa(tmp_path / "init")
    teacher, _ = _xlmr_teacher(tmp_path / "teacher")
    common = {
        "train_files": [str(_squad(tmp_path / "t.json"))],
        "init": str(init),
        "batch_size": 2,
        "max_steps": 2,
        "lr": 1e-2,
        "warmup": 0.0,
        "progress": False,
        "max_length": 64,
        "stride": 16,
        "shared_norm": 1.0,
        "seed": 3,
    }
    taught = train(TrainConfig(output_dir=str(tmp_path / "taught"), teacher=str(teacher), **common))
    alone = train(TrainConfig(output_dir=str(tmp_path / "alone"), **common))
    info = json.loads((taught / "train_info.json").read_text())
    assert info["steps"] == 2 and info["config"]["teacher"] == str(teacher)
    assert any(not torch.equal(a, b) for a, b in zip(_weights(taught).values(), _weights(alone).values()))
    feats = {"input_ids": [[1, 2, 3]], "token_type_ids": [[0, 0, 1]], "start": [0], "end": [0]}
    assert "token_type_ids" not in collate(feats, [0], 0, token_types=False)


def test_collate_pads_student_and_teacher_rows():
    from odqa.reader.training.train import collate, collate_teacher

    feats = {
        "input_ids": [[5, 6, 7], [5, 8]],
        "token_type_ids": [[0, 1, 1], [0, 1]],
        "start": [1, 0],
        "end": [2, 0],
        "teacher_ids": [[9, 9], [9, 9, 9, 9]],
        "teacher_start_map": [[0, -1, 1], [2, 3]],
        "teacher_end_map": [[1, -1, 1], [3, 3]],
    }
    batch = collate(feats, [0, 1], pad_id=0)
    assert batch["input_ids"].tolist() == [[5, 6, 7], [5, 8, 0]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1], [1, 1, 0]]
    assert batch["token_type_ids"].tolist() == [[0, 1, 1], [0, 1, 0]]
    assert batch["start_positions"].tolist() == [1, 0]
    taught = collate_teacher(feats, [0, 1], pad_id=1, student_length=4)
    assert taught["input_ids"].tolist() == [[9, 9, 1, 1], [9, 9, 9, 9]]
    assert taught["attention_mask"].tolist() == [[1, 1, 0, 0], [1, 1, 1, 1]]
    assert taught["start_map"].tolist() == [[0, -1, 1, -1], [2, 3, -1, -1]]  # to the student batch's length
    assert "token_type_ids" not in taught
