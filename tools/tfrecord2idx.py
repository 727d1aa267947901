"""Shim: `python tools/tfrecord2idx.py ...` == console script `tfrecord2idx` (bert_fin.cli)."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bert_fin.cli.tfrecord2idx import main
if __name__ == "__main__": sys.exit(main())
