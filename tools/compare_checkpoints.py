"""Shim: `python tools/compare_checkpoints.py ...` from the repo root runs bert_fin.cli.compare_checkpoints.main."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bert_fin.cli.compare_checkpoints import main; sys.exit(main())
