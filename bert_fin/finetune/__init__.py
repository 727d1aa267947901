"""Fine-tuning a pretrained checkpoint: run_classifier.py (classify/) and run_ner.py (ner/), on a
shared base in this package; and reading one: extract_features.py (features/).

  classify/   sentence / sentence-pair classification: tasks (jsonl, tsv, google's cola / mnli /
              mrpc / xnli), features, long_text (--long_text: head, tail, head_tail, chunks),
              documents (chunks: figures and predictions per document), model (google's
              classifier, --pooling), metrics (per-class P/R/F1), flags (its settings table),
              orchestration (preflight, train / eval / predict);
  features/   extract_features: google's JSON-lines features and sentence vectors, streamed
              (flags, inputs, outputs, extract);
  ner/        named entities (token tagging): data (chars / CLUENER files, BIO/BIOES tags),
              features (WordPiece alignment, windows), model (the tagger), crf (--use_crf),
              metrics (entity P/R/F1), flags (its settings table), orchestration;
  shared      program (the command line: settings built and checked once, one-line refusals),
              settings (the typed settings table both take, the source of their flags),
              model_inputs (config / vocab / --init_checkpoint checks), estimator_skeleton
              (steps, Estimator, training on every rank, eval / predict on rank 0), train_op
              (optimizer, schedule, step lines), recipes (--layerwise_lr_decay,
              --reinit_top_layers: small-data recipes, recipe.json), batches (arrays -> input_fn, Horovod shards),
              finetuned (what an output_dir holds, which weights a run reads), label_lists
              (splits, labels.txt, DataError, the label-list rules).

The yardstick that compares checkpoints by fine-tuning them is bert_fin/yardstick/.
"""
