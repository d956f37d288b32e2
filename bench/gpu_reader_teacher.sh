#!/bin/bash
# Issue 51's GPU run, one call on a lent GPU machine (no index, no hub there; see docs/training.md): train an
# all-mpnet-base-v2 reader (the teacher) on open-domain distant supervision + SQuAD v1.1 train, score it on
# saved open-dev passages, then distil it into the MiniLM reader with v9's recipe (v8 + distant + 3k SQuAD,
# shared normalisation, 1,900 steps, seed 53) and score the student the same way.
# Inputs under $G (default .gpu/run): mpnet/ (all-mpnet-base-v2 folder), v8/ (the reader to start the student
# from), distant-open-sn.json, train-v1.1.json, squad-train-3k.json, open-dev-bm25-top10.jsonl (from
# `bench/read_saved.py save`). Outputs under $OUT: tables, logs, and the student's fp16 export as tar parts.
set -uo pipefail
G=${G:-.gpu/run}
R=${RUNS:-/tmp/odqa-runs}
OUT=${OUT:-/tmp/odqa-out}
TEACHER_MINUTES=${TEACHER_MINUTES:-3.0}
STUDENT_MINUTES=${STUDENT_MINUTES:-2.5}
DEVICE=${DEVICE:-cuda}
LIMIT=${LIMIT:+--limit $LIMIT}  # smoke tests: the first N questions of each file
mkdir -p "$R" "$OUT"
export PYTHONUNBUFFERED=1 ODQA_HOME=$R/home TOKENIZERS_PARALLELISM=true
(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null || echo "no GPU") | tee "$OUT/machine.txt"
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)" \
    | tee -a "$OUT/machine.txt"
SECONDS=0
python3 run_qa.py train-reader --train $G/distant-open-sn.json $G/train-v1.1.json --init $G/mpnet \
    --output $R/teacher $LIMIT --epochs 1 --max-minutes $TEACHER_MINUTES --gpu-batch-size 64 --lr 3e-5 --warmup 0.06 \
    --shared-norm 1.0 --negative-ratio 0.25 --seed 61 --precision bf16 --save-every 100000 \
    2>&1 | grep -v -i warn | tee $OUT/teacher.log | grep -E "windows|training|step .*00/|saved" | tail -40
echo "teacher done at ${SECONDS}s"
python3 bench/read_saved.py read --passages $G/open-dev-bm25-top10.jsonl --readers $R/teacher/final \
    --device $DEVICE --out $OUT/teacher-open-dev.md 2>&1 | grep -E "^\| " | tail -6
echo "teacher read at ${SECONDS}s"
python3 run_qa.py train-reader --train $G/distant-open-sn.json $G/squad-train-3k.json --init $G/v8 \
    --teacher $R/teacher/final --distill-weight 1.0 --distill-temperature 2.0 \
    --output $R/student $LIMIT --max-steps 1900 --max-minutes $STUDENT_MINUTES --gpu-batch-size 32 --lr 5e-5 \
    --warmup 0.06 --shared-norm 1.0 --negative-ratio 0.25 --seed 53 --precision bf16 --save-every 100000 \
    2>&1 | grep -v -i warn | tee $OUT/student.log | grep -E "windows|training|step .*00/|saved" | tail -30
echo "student done at ${SECONDS}s"
python3 -m odqa.reader.export $R/student/final $R/student-export 2>&1 | tail -1
tar -C $R -cf $R/student-export.tar student-export && split -b 15M -d $R/student-export.tar $OUT/student-export.tar.
python3 bench/read_saved.py read --passages $G/open-dev-bm25-top10.jsonl --readers $R/student-export \
    --device $DEVICE --out $OUT/student-open-dev.md 2>&1 | grep -E "^\| " | tail -6
echo "all done at ${SECONDS}s"
ls -la $OUT
