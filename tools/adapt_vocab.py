"""Shim: `python tools/adapt_vocab.py ...` from the repo root runs bert_fin.cli.adapt_vocab.main."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bert_fin.cli.adapt_vocab import main; sys.exit(main())
