"""google-research/bert's special tokens, spelled once for all of bert_fin.

  PAD   "[PAD]"   id 0 in google's vocabs: padding of input_ids, never predicted
  UNK   "[UNK]"   a word WordPiece cannot cover
  CLS   "[CLS]"   first token of every sequence; its final state feeds the pooler
  SEP   "[SEP]"   ends each segment
  MASK  "[MASK]"  replaces a token chosen for the masked-LM prediction (80% of the time)

ALL lists them in google's vocab order ([PAD] ... [UNK] [CLS] [SEP] [MASK]). Imports nothing.
"""
PAD = "[PAD]"
UNK = "[UNK]"
CLS = "[CLS]"
SEP = "[SEP]"
MASK = "[MASK]"
ALL = (PAD, UNK, CLS, SEP, MASK)


def ids(vocab):
  """{token: id} of ALL in vocab ({token: id}); ValueError naming any the vocab lacks."""
  missing = [token for token in ALL if token not in vocab]
  if missing:
    raise ValueError("vocab file lacks special token(s) %s" % missing)
  return {token: vocab[token] for token in ALL}
