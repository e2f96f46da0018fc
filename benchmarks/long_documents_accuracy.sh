#!/usr/bin/env bash
# Long documents (issue 19), accuracy: a small XLNet pretrained with
# run_pretrain.py on the shared corpus, then fine-tuned on the shared IMDB
# reviews twice with the same steps and seed: truncation at 128
# (--max_segments=1) and 4 segments of 128 with a memory of 128
# (--max_segments=4 --mem_len=128). Dev = the test split.
#
#   benchmarks/long_documents_accuracy.sh OUT [STAGE...]
#
# Run from the repository root. STAGEs (default: all, in this order):
#   records   pretraining records from ../shared/data/corpus (OUT/proc)
#   pretrain  4 layers, d_model 256, PRETRAIN_STEPS steps (OUT/pretrain)
#   trunc     fine-tune, --max_segments=1 (OUT/trunc)
#   seg4      fine-tune, --max_segments=4 --mem_len=128 (OUT/seg4)
#   report    OUT/accuracy.json: both accuracies, steps and wall times
# Each stage logs to OUT/<stage>.log (its progress lines), writes its
# command to OUT/<stage>.cmd and its wall time and peak RSS (GNU time) to
# OUT/<stage>.time. Sizes: PRETRAIN_STEPS (default 1200), FT_STEPS (600),
# FT_BATCH (16), FT_LR (5e-5), SEED (0).
set -euo pipefail

OUT=${1:?usage: $0 OUT [records pretrain trunc seg4 report]}
shift
STAGES=${*:-records pretrain trunc seg4 report}
PY=${PY:-.venv/bin/python}
SHARED=${XLNET_SHARED:-../shared}
SPIECE=$SHARED/data/spiece/spiece.model
PRETRAIN_STEPS=${PRETRAIN_STEPS:-1200}
FT_STEPS=${FT_STEPS:-600}
FT_BATCH=${FT_BATCH:-16}
FT_LR=${FT_LR:-5e-5}
SEED=${SEED:-0}
mkdir -p "$OUT"

# Runs a stage's command with its log, command file and wall time.
stage() {
  local name=$1
  shift
  printf '%q ' "$@" > "$OUT/$name.cmd"
  echo >> "$OUT/$name.cmd"
  echo "$(date -u +%H:%M:%S) $name: $*"
  /usr/bin/time -f "wall_seconds %e max_rss_kb %M" -o "$OUT/$name.time" \
    "$@" > "$OUT/$name.log" 2>&1
  echo "$(date -u +%H:%M:%S) $name done: $(cat "$OUT/$name.time")"
}

# The fine-tuning command shared by both runs; extra flags follow.
finetune() {
  local name=$1
  shift
  stage "$name" "$PY" run_classifier.py --task_name=imdb \
    --data_dir="$SHARED/data/imdb/aclImdb" \
    --model_config_path="$OUT/pretrain/original/xlnet_config.json" \
    --init_checkpoint="$OUT/pretrain/original/xlnet_model.ckpt" \
    --spiece_model_file="$SPIECE" \
    --output_dir="$OUT/$name/data" --model_dir="$OUT/$name/model" \
    --do_train --do_eval --max_seq_length=128 \
    --train_batch_size="$FT_BATCH" --eval_batch_size=32 \
    --learning_rate="$FT_LR" --train_steps="$FT_STEPS" \
    --warmup_steps=$((FT_STEPS / 10)) --iterations=50 --seed="$SEED" "$@"
}

for s in $STAGES; do
  case $s in
    records)
      stage records "$PY" -m data_utils.pretraining.create_pretrain_data \
        --input_glob="$SHARED/data/corpus/*.txt" --sp_path="$SPIECE" \
        --save_dir="$OUT/proc" --bsz_per_host=16 --seq_len=128 \
        --reuse_len=64 --num_predict=21 --perm_size=32 --bi_data \
        --num_passes=1 --seed="$SEED" ;;
    pretrain)
      stage pretrain "$PY" run_pretrain.py \
        --record_info_dir="$OUT/proc/tfrecords" --model_dir="$OUT/pretrain" \
        --train_batch_size=16 --seq_len=128 --reuse_len=64 --perm_size=32 \
        --num_predict=21 --bi_data --mem_len=128 \
        --n_layer=4 --d_model=256 --n_head=4 --d_head=64 --d_inner=1024 \
        --train_steps="$PRETRAIN_STEPS" \
        --warmup_steps=$((PRETRAIN_STEPS / 10)) \
        --learning_rate=5e-4 --save_steps=400 --iterations=100 \
        --seed="$SEED" ;;
    trunc) finetune trunc --max_segments=1 ;;
    seg4) finetune seg4 --max_segments=4 --mem_len=128 ;;
    report)
      "$PY" - "$OUT" "$PRETRAIN_STEPS" "$FT_STEPS" "$FT_BATCH" "$SEED" <<'EOF'
import json, os, sys
out, pre, ft, batch, seed = sys.argv[1:]
def wall(name):
  path = os.path.join(out, name + ".time")
  if not os.path.exists(path):
    return None
  words = open(path).read().split()
  return {"wall_seconds": float(words[words.index("wall_seconds") + 1]),
          "max_rss_mb": int(words[words.index("max_rss_kb") + 1]) // 1024}
def result(name):
  path = os.path.join(out, name, "model", "eval_results_dev.json")
  return json.load(open(path)) if os.path.exists(path) else None
report = {"pretrain_steps": int(pre), "finetune_steps": int(ft),
          "finetune_batch": int(batch), "seed": int(seed),
          **{name: {"time": wall(name), "eval": result(name),
                    "command": open(os.path.join(out, name + ".cmd")).read()
                    .strip() if os.path.exists(os.path.join(
                        out, name + ".cmd")) else None}
             for name in ("records", "pretrain", "trunc", "seg4")}}
json.dump(report, open(os.path.join(out, "accuracy.json"), "w"), indent=2)
print(json.dumps(report, indent=2))
EOF
      ;;
    *) echo "unknown stage $s (records pretrain trunc seg4 report)" >&2
       exit 2 ;;
  esac
done
