"""Shim: `python tools/export_serving.py ...` == console script `bert-fin-export-serving`."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bert_fin.cli.export_serving import main
if __name__ == "__main__": sys.exit(main())
