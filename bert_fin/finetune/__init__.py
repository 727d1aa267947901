"""Fine-tuning a pretrained checkpoint: run_classifier.py (classify/), run_ner.py (ner/) and
run_squad.py (squad/), on a shared base in this package; and reading one: extract_features.py
(features/).

  classify/   sentence / sentence-pair classification: tasks (jsonl, tsv, google's cola / mnli /
              mrpc / xnli), features, long_text (--long_text: head, tail, head_tail, chunks),
              per_document (chunks: figures and predictions per document), model (google's
              classifier, --pooling), metrics (per-class P/R/F1), flags (its settings table),
              orchestration (preflight, train / eval / predict);
  features/   extract_features: google's JSON-lines features and sentence vectors, streamed
              (flags, inputs, outputs, extract);
  ner/        named entities (token tagging): data (chars / CLUENER files, BIO/BIOES tags),
              features (WordPiece alignment, windows), model (the tagger), crf (--use_crf),
              metrics (entity P/R/F1), flags (its settings table), orchestration;
  squad/      reading comprehension (SQuAD v1.1 / v2.0, CMRC 2018, DRCD): data, offsets,
              features (google's windows; exact character offsets for Chinese), model (the span
              head), postprocess (n-best, final text, null odds), evaluate (EM / F1), flags,
              orchestration;
  shared      program (the checks before TensorFlow; the command line: bert_fin/command_line.py),
              settings (the typed settings table both take, the source of their flags),
              model_inputs (config / vocab / --init_checkpoint checks), estimator_skeleton
              (steps, TrainSetup, the worker's Estimator, training on every rank: what each
              orchestration.run calls top to bottom before its own eval / predict), train_op
              (optimizer, schedule, step lines), recipes (--layerwise_lr_decay,
              --reinit_top_layers: small-data recipes, recipe.json), batches (arrays -> input_fn,
              Horovod shards),
              finetuned (what an output_dir holds, which weights a run reads), label_lists
              (splits, labels.txt, DataError, the label-list rules), token_windows (which tokens
              a row reads: pair counts, head / tail cuts, run_squad's windows; numpy only, the
              ONNX client of every serving export imports it too).

The yardstick that compares checkpoints by fine-tuning them is bert_fin/yardstick/.
"""
