"""bert_fin.tokenization: google-research/bert's tokenizer, its HF-backed twin, and vocab building.

Modules:
  google.py          google's tokenization.py, behaviour for behaviour (FullTokenizer, the faithful
                     path); its public names are re-exported here, so `from bert_fin import
                     tokenization; tokenization.FullTokenizer(vocab_file)` reads as with google's.
  fast.py            FastFullTokenizer: the same output with WordPiece in Rust (HF `tokenizers`).
  unicode_tables.py  the Unicode category ranges fast.py needs, precomputed.
  vocab.py           build or extend a google-layout vocab.txt (tools/build_vocab.py).
  config_fit.py      check_vocab_size: a vocab against a config's vocab_size (padded accepted).
  wordpiece_trainer.py  the deterministic WordPiece (BPE with "##") trainer vocab.py runs.
`make_tokenizer(vocab_file, do_lower_case, fast)` picks the fast or the faithful tokenizer.
fast.py and vocab.py import google.py (vocab.py also wordpiece_trainer.py, which imports
nothing of bert_fin); google.py imports special_tokens.py and, to read a local vocab file as
untrusted input (a regular file, bounded: a FIFO or a huge file is refused in one line),
bert_fin/guard/untrusted.py.
"""
from bert_fin.tokenization.config_fit import check_vocab_size
from bert_fin.tokenization.google import MAX_INPUT_CHARS_PER_WORD
from bert_fin.tokenization.google import UNK_TOKEN
from bert_fin.tokenization.google import BasicTokenizer
from bert_fin.tokenization.google import FullTokenizer
from bert_fin.tokenization.google import WordpieceTokenizer
from bert_fin.tokenization.google import convert_by_vocab
from bert_fin.tokenization.google import convert_ids_to_tokens
from bert_fin.tokenization.google import convert_to_unicode
from bert_fin.tokenization.google import convert_tokens_to_ids
from bert_fin.tokenization.google import is_chinese_char
from bert_fin.tokenization.google import is_control
from bert_fin.tokenization.google import is_punctuation
from bert_fin.tokenization.google import is_whitespace
from bert_fin.tokenization.google import load_vocab
from bert_fin.tokenization.google import printable_text
from bert_fin.tokenization.google import validate_case_matches_checkpoint
from bert_fin.tokenization.google import whitespace_tokenize


def make_tokenizer(vocab_file, do_lower_case=True, fast=True):
  """Returns fast.FastFullTokenizer (HF-backed, identical output) if `fast`, else FullTokenizer."""
  if fast:
    from bert_fin.tokenization import fast as fast_lib  # pylint: disable=g-import-not-at-top
    return fast_lib.FastFullTokenizer(vocab_file, do_lower_case=do_lower_case)
  return FullTokenizer(vocab_file, do_lower_case=do_lower_case)
