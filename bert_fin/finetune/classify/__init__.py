"""run_classifier.py: sentence / sentence-pair classification on a pretrained checkpoint.

tasks (data files; google_tasks: cola / mnli / mrpc / xnli as google reads them), features
(examples -> [CLS] A [SEP] B [SEP] arrays), long_text (texts longer than max_seq_length: head,
tail, head_tail, chunks; pure arithmetic), documents (chunks: eval figures and predictions per
document from its windows' pooled logits), model (google's classifier model_fn, --pooling),
metrics (per-class P/R/F1, macro-F1, from a confusion matrix), flags (run_classifier's settings
table: finetune/settings.py's plus its task group), orchestration (preflight, then train /
eval / predict).
"""
