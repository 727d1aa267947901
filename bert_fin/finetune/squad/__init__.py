"""run_squad.py: extractive reading comprehension (SQuAD v1.1 / v2.0, CMRC 2018, DRCD) on a
pretrained checkpoint, google's run_squad on bert_fin's model and training step.

  flags          run_squad's settings table (google's flags and defaults, the shared fine-tuning
                 groups) and its checks;
  data           SQuAD-schema JSON -> checked questions (one-line refusals, bounded input);
  offsets        a context's WordPiece tokens with their character spans in the original text;
  features       questions -> windows (google's doc spans, max context, start / end positions;
                 exact character offsets for Chinese);
  model          google's span head (cls/squad/output_weights) and the model_fn;
  postprocess    logits -> n-best, final text, null odds (google's write_predictions);
  evaluate       EM / F1: SQuAD's and CMRC 2018's definitions;
  orchestration  preflight, then train / predict / score, top to bottom.
"""
