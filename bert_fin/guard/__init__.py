"""Files from outside read as hostile input, below every package that reads one (tokenization's
vocab, modeling's bert_config.json, interop's transformers folders): untrusted.py (regular files
inside their folder, bounded reads, JSON depth, the budget a folder's config justifies)."""
