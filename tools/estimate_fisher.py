"""Shim: `python tools/estimate_fisher.py ...` == console script `bert-fin-estimate-fisher` (bert_fin.cli)."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bert_fin.cli.estimate_fisher import main
if __name__ == "__main__": sys.exit(main())
