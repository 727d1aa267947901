"""Shim: `python tools/shard_corpus.py ...` from the repo root runs bert_fin.cli.shard_corpus.main."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bert_fin.cli.shard_corpus import main; sys.exit(main())
