"""Does a vocab file fit a model config's embedding table? The one check every program makes.

A vocab of N tokens (google's ids 0..N-1: the line numbers) needs N rows of word_embeddings. A
config whose vocab_size is larger pads the table (NVIDIA's BERT rounds google's 30522 up to 30528, a
multiple of 8 for tensor cores; bert_fin's own vocabs pad with [unusedN] lines instead): the
rows past the vocab are never looked up, since the tokenizer never produces their ids. So

  vocab_size == N   fits;
  vocab_size >  N   fits, padded: `check_vocab_size` returns a one-line note for the start-up;
  vocab_size <  N   refused: ids >= vocab_size would have no embedding (another vocab).

Used by run_classifier / run_ner (finetune/model_inputs.py), the yardstick (yardstick/checks.py),
the transformers export (export/hf.py) and import (interop/hf_folder.py). run_pretraining reads no vocab: it checks the records' ids
against vocab_size (training/preflight.py), which a padded config passes the same way.
"""
from bert_fin.tokenization import google


def embedding_rows(vocab):
  """Rows of the embedding table a vocab (token -> id, google's load_vocab) needs: max id + 1."""
  return max(vocab.values()) + 1 if vocab else 0


def check_vocab_size(vocab_file, vocab_size, what="--vocab_file"):
  """None when vocab_file's tokens fill vocab_size exactly; the padding note (one line) when the
  config is larger; ValueError (one line, `what vocab_file` first) when it is smaller."""
  return check_token_count(embedding_rows(google.load_vocab(vocab_file)), vocab_size,
                           "%s %s" % (what, vocab_file))


def check_token_count(tokens, vocab_size, vocab_name, config_name="the config's"):
  """check_vocab_size for a vocab of `tokens` tokens named vocab_name (e.g. a transformers
  folder's tokenizer.json); config_name: whose vocab_size it is, in the messages."""
  if tokens > vocab_size:
    raise ValueError(
        "%s has %d tokens, more than %s vocab_size %d (ids >= %d would have no embedding): pass "
        "the vocab the checkpoint was trained with, or its config" % (
            vocab_name, tokens, config_name, vocab_size, vocab_size))
  if tokens < vocab_size:
    return ("%s has %d tokens, %s vocab_size is %d: embedding rows %d..%d are padding that no "
            "token uses (as NVIDIA's multiple-of-8 configs); accepted" % (
                vocab_name, tokens, config_name, vocab_size, tokens, vocab_size - 1))
  return None
