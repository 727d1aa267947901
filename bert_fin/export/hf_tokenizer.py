"""The tokenizer files of a transformers BERT folder, equal to bert_fin's tokenizer on real text.

Written next to the weights:
  vocab.txt                the vocab's tokens one a line, id = line number, as google reads them
                           (a BOM and CRLF line ends are not copied: transformers' BertTokenizer
                           would keep them in the tokens);
  tokenizer_config.json    do_lower_case, tokenize_chinese_chars=true and strip_accents=null
                           (accents are stripped exactly when lower-casing, as google does),
                           model_max_length, the special tokens;
  special_tokens_map.json  [UNK] [SEP] [PAD] [CLS] [MASK];
  tokenizer.json           the `tokenizers` pipeline BertTokenizerFast loads as it is:
                           BertNormalizer -> BertPreTokenizer -> WordPiece("##", "[UNK]",
                           max_input_chars_per_word=200 as google, not HF's default 100) and
                           the [CLS] A [SEP] (B [SEP]) template with segment ids 0 / 1.

Known differences from google's FullTokenizer (HF's Rust normaliser cannot be configured out of
them; bert_fin.tokenization.fast lists them): private-use characters are deleted, accents are
stripped before lower-casing, a few recent Unicode punctuation/CJK code points are classified
differently, and special tokens written in the text ("[MASK]") stay whole. Chinese and ASCII text
tokenizes identically (tests/test_export_hf.py checks ids against FullTokenizer).
"""
import json

from tokenizers import Tokenizer
from tokenizers import decoders
from tokenizers import models
from tokenizers import normalizers
from tokenizers import pre_tokenizers
from tokenizers import processors

from bert_fin import io_utils
from bert_fin import tokenization
from bert_fin.tokenization import special_tokens as special

# transformers' special-token roles and bert_fin's vocab tokens for them.
SPECIAL_TOKENS = {
    "unk_token": special.UNK, "sep_token": special.SEP, "pad_token": special.PAD,
    "cls_token": special.CLS, "mask_token": special.MASK,
}
FILES = ("vocab.txt", "tokenizer_config.json", "special_tokens_map.json", "tokenizer.json")


def vocab_lines(vocab_file):
  """The vocab's lines as google's load_vocab reads them: a UTF-8 byte order mark dropped, each
  line stripped (so CRLF ends lose their CR). Written one a line, they are what transformers'
  BertTokenizer reads too (it strips only the "\n"): the same token for every id."""
  with open(vocab_file, encoding="utf-8-sig") as f:
    lines = f.read().split("\n")
  if lines and not lines[-1]:
    lines.pop()
  return [line.strip() for line in lines]


def build_tokenizer(vocab, do_lower_case):
  """tokenizers.Tokenizer for `vocab` (OrderedDict token -> id), BertTokenizerFast's pipeline."""
  missing = [token for token in SPECIAL_TOKENS.values() if token not in vocab]
  if missing:
    raise ValueError("the vocab lacks the special token(s) %s" % ", ".join(missing))
  wordpiece = models.WordPiece(vocab=dict(vocab), unk_token=special.UNK,
                               max_input_chars_per_word=tokenization.MAX_INPUT_CHARS_PER_WORD)
  wordpiece.continuing_subword_prefix = "##"
  tokenizer = Tokenizer(wordpiece)
  tokenizer.normalizer = normalizers.BertNormalizer(
      clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=do_lower_case)
  tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
  cls, sep = SPECIAL_TOKENS["cls_token"], SPECIAL_TOKENS["sep_token"]
  tokenizer.post_processor = processors.TemplateProcessing(
      single="%s:0 $A:0 %s:0" % (cls, sep),
      pair="%s:0 $A:0 %s:0 $B:1 %s:1" % (cls, sep, sep),
      special_tokens=[(cls, vocab[cls]), (sep, vocab[sep])])
  tokenizer.decoder = decoders.WordPiece(prefix="##")
  tokenizer.add_special_tokens([SPECIAL_TOKENS[role] for role in sorted(SPECIAL_TOKENS)])
  return tokenizer


def tokenizer_config(do_lower_case, model_max_length):
  """The dict of tokenizer_config.json."""
  config = dict(SPECIAL_TOKENS)
  config.update(tokenizer_class="BertTokenizer", do_lower_case=bool(do_lower_case),
                tokenize_chinese_chars=True, strip_accents=None,
                model_max_length=int(model_max_length), clean_up_tokenization_spaces=False)
  return config


def write_tokenizer_files(vocab_file, output_dir, do_lower_case, model_max_length):
  """Writes FILES into output_dir (each atomically); returns their paths."""
  vocab = tokenization.load_vocab(vocab_file)
  tokenizer = build_tokenizer(vocab, do_lower_case)
  paths = [output_dir + "/" + name for name in FILES]
  with io_utils.atomic_output(paths[0]) as f:
    f.write("".join(token + "\n" for token in vocab_lines(vocab_file)))
  io_utils.write_json_atomic(paths[1], tokenizer_config(do_lower_case, model_max_length))
  io_utils.write_json_atomic(paths[2], SPECIAL_TOKENS)
  with io_utils.atomic_output(paths[3]) as f:
    f.write(json.dumps(json.loads(tokenizer.to_str()), ensure_ascii=False, indent=2))
  return paths
