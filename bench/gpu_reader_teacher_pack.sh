#!/bin/bash
# Pack bench/gpu_reader_teacher.sh's inputs for a GPU machine that takes at most 64 MiB a call: five folders
# .gpu/c1 .. .gpu/c5 (each under 61 MB; add them to .git/info/exclude), sent one per call on the warm machine
# with `carry` (c4 together with .whl, the PyStemmer and bm25s wheels for Python 3.12 that reading needs), the
# last call running `bash .gpu/c5/go.sh`, which joins the parts and runs the job. Move models/ out of the work
# tree while calling (its tracked files would travel too).
#   MPNET=folder of all-mpnet-base-v2 (docs/training.md)  V8=reader v8 folder  RUNS=folder with
#   distant-open-sn.json, squad-train-3k.json, open-dev-bm25-top10.jsonl  D=../shared/data
set -euo pipefail
MPNET=${MPNET:?folder of all-mpnet-base-v2} V8=${V8:?reader v8 folder} RUNS=${RUNS:?runs folder}
D=${D:-../shared/data}
rm -rf .gpu/c1 .gpu/c2 .gpu/c3 .gpu/c4 .gpu/c5 && mkdir -p .gpu/c1 .gpu/c2 .gpu/c3 .gpu/c4 .gpu/c5 .gpu/tmp
python3 - "$MPNET" <<'PY'
import sys, torch
from safetensors.torch import load_file, save_file
weights = load_file(f"{sys.argv[1]}/model.safetensors")
save_file({k: v.half().contiguous() for k, v in weights.items()}, ".gpu/tmp/model.safetensors", metadata={"format": "pt"})
PY
split -b 60000000 -d -a 1 .gpu/tmp/model.safetensors .gpu/tmp/mpnet.part.
for i in 0 1 2 3; do mv .gpu/tmp/mpnet.part.$i .gpu/c$((i + 1))/; done
(cd .gpu/tmp && sha256sum model.safetensors | cut -d' ' -f1) > .gpu/c1/model.sha256
cp "$MPNET"/config.json "$MPNET"/special_tokens_map.json "$MPNET"/tokenizer.json "$MPNET"/tokenizer_config.json \
    "$MPNET"/vocab.txt .gpu/c1/
xz -T2 -6 -c "$RUNS/distant-open-sn.json" > .gpu/c4/distant-open-sn.json.xz
cp -r "$V8" .gpu/c5/v8
xz -6 -c "$D/squad/train-v1.1.json" > .gpu/c5/train-v1.1.json.xz
xz -c "$RUNS/squad-train-3k.json" > .gpu/c5/squad-train-3k.json.xz
xz -c "$RUNS/open-dev-bm25-top10.jsonl" > .gpu/c5/open-dev-bm25-top10.jsonl.xz
rm -rf .gpu/tmp .whl && mkdir -p .whl
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform manylinux1_x86_64 -d .whl PyStemmer bm25s
cat > .gpu/c5/go.sh <<'GO'
#!/bin/bash
set -e
G=.gpu/run
mkdir -p $G/mpnet
cp .gpu/c1/*.json .gpu/c1/vocab.txt $G/mpnet/
cat .gpu/c1/mpnet.part.0 .gpu/c2/mpnet.part.1 .gpu/c3/mpnet.part.2 .gpu/c4/mpnet.part.3 > $G/mpnet/model.safetensors
echo "$(cat .gpu/c1/model.sha256)  $G/mpnet/model.safetensors" | sha256sum -c
python3 - <<'PY'
import glob, lzma, os, shutil
for src in glob.glob(".gpu/c4/*.xz") + glob.glob(".gpu/c5/*.xz"):
    with lzma.open(src) as f, open(os.path.join(".gpu/run", os.path.basename(src)[:-3]), "wb") as g:
        shutil.copyfileobj(f, g, 1 << 22)
PY
rm -rf $G/v8 && cp -r .gpu/c5/v8 $G/v8
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site
[ -n "${NO_JOB:-}" ] && exit 0
G=$G bash bench/gpu_reader_teacher.sh
GO
du -sb .gpu/c1 .gpu/c2 .gpu/c3 .gpu/c4 .gpu/c5 .whl
