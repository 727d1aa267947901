"""Shim: `python tools/export_hf.py ...` == console script `bert-fin-export-hf` (bert_fin.cli)."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bert_fin.cli.export_hf import main
if __name__ == "__main__": sys.exit(main())
