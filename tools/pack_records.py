"""Shim: `python tools/pack_records.py ...` from the repo root runs bert_fin.cli.pack_records.main."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bert_fin.cli.pack_records import main; sys.exit(main())
