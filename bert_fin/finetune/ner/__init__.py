"""run_ner.py: Chinese named-entity recognition (token tagging) on a pretrained checkpoint.

data (chars `char TAG` files / CLUENER2020 JSON, BIO / BIOES tags, prediction files), features
(WordPiece alignment, overlapping windows, joined back per sentence), model (the tagger model_fn
on every token), crf (--use_crf: CRF loss, Viterbi decoding), metrics (entity P/R/F1, conlleval
decoding), flags (run_ner's settings table: finetune/settings.py's plus its task group),
orchestration (preflight, then train / eval / predict).
"""
