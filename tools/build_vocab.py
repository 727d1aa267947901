"""Shim: `python tools/build_vocab.py ...` from the repo root runs bert_fin.cli.build_vocab.main."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bert_fin.cli.build_vocab import main; sys.exit(main())
