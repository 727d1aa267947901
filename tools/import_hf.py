"""Shim: `python tools/import_hf.py ...` == console script `bert-fin-import-hf` (bert_fin.cli)."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bert_fin.cli.import_hf import main
if __name__ == "__main__": sys.exit(main())
