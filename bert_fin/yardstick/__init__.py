"""The fine-tuning yardstick (tools/compare_checkpoints.py): does pretraining pay? Checkpoints x
tasks x seeds (x learning rates), each cell a run_classifier / run_ner subprocess, then a report.

  grid        the plan (every check before any training) and its cells: run, skip finished ones,
              collect their results;
  checks      the checks of a checkpoint (config, vocab, encoder weights) and of a task's text
              against a vocab ([UNK] rate);
  task_kinds  the task interface: classification or named entities (which program, which flags,
              which figures);
  report      results.md / results.csv / results.png (mean +- std over seeds, the rate chosen on
              dev).
"""
