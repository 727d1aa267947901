"""The Python that has torch and transformers, for the live comparisons with transformers: this
one when it imports both, else $BERT_FIN_HF_PYTHON, else None (those tests are skipped)."""
import os
import sys

SKIP_REASON = "no torch + transformers here (set BERT_FIN_HF_PYTHON to a python that has them)"


def hf_python():
  try:
    import torch  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
    import transformers  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
    return sys.executable
  except ImportError:
    return os.environ.get("BERT_FIN_HF_PYTHON")
