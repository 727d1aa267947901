"""Questions -> windows of [CLS] question [SEP] context part [SEP], as google's run_squad.py
convert_examples_to_features, with exact character offsets for Chinese (pure Python + numpy).

For each question (google's algorithm, step by step):
  query      tokenizer.tokenize(question)[:max_query_length];
  context    WordPiece tokens of the whole paragraph (offsets.context_tokens: the tokens google
             gets word by word, each with its characters in the context);
  answer     (training) the tokens of the answer, by one of two rules chosen per paragraph:
               words (no CJK ideograph in the context: google's, exactly) answer_start -> the
                 whitespace word holding it -> its first token; the answer's last character ->
                 its word's last token; then _improve_answer_span: the first sub-span whose
                 tokens are the answer's own tokens; an answer whose words do not contain its
                 whitespace-normalised text is skipped ("Could not find answer");
               chars (a CJK ideograph in the context: google's word rule does not fit text without
                 spaces) the token holding answer_start and the token holding the answer's last
                 character (offsets.char_span_to_tokens); no whitespace involved.
             An answer whose boundary falls inside a token trains on the enclosing tokens and is
             counted (Alignment.enclosing); one that covers no token is skipped and counted;
  windows    doc spans of max_seq_length - len(query) - 3 tokens, the next starting
             min(length, doc_stride) later, until one reaches the end;
             token_is_max_context: a token's window is the one where min(left, right context) +
             0.01 * window length is largest (the first of equals);
  positions  (training) the answer's tokens in the window, offset by len(query) + 2; 0 and 0
             ([CLS]) when the window does not hold the whole answer, and for impossible
             questions (v2.0).
Arrays, one row a window in question order: input_ids, segment_ids int32 [N, max_seq_length];
input_len int32 [N] (the real tokens: the sum of google's input_mask); training also
start_positions, end_positions int32 [N] (google's feature names).
"""
import bisect
import collections

import numpy as np

from bert_fin.records import schema as records
from bert_fin.tokenization import special_tokens as special
from bert_fin import tokenization
from bert_fin.finetune import token_windows
from bert_fin.finetune.squad import offsets

START_POSITIONS, END_POSITIONS = "start_positions", "end_positions"  # google's feature names
SQUAD_WHITESPACE = (" ", "\t", "\r", "\n", "\u202f")  # google's run_squad is_whitespace

Paragraph = collections.namedtuple("Paragraph", [
    "context", "tokens", "words", "char_to_word", "token_words", "word_tokens", "by_chars"])
Paragraph.__doc__ = """context: str; tokens: offsets.ContextTokens; words, char_to_word: google's
doc_tokens (whitespace-separated words) and char_to_word_offset; token_words: [int] the word of
each token (google's tok_to_orig_index); word_tokens: [int] each word's first token (google's
orig_to_tok_index); by_chars: the answer rule and the prediction text go by character offsets
(the context holds a CJK ideograph), else by google's words."""

Window = collections.namedtuple("Window", [
    "question_index", "context_index", "span_index", "doc_start", "doc_length", "query_length",
    "is_max_context"])
Window.__doc__ = """One row: the question (index into the file's questions; its paragraph:
context_index), its span_index-th window, holding context tokens doc_start .. doc_start + doc_length - 1 at positions
query_length + 2 ...; is_max_context: bool [doc_length] (google's token_is_max_context)."""

Alignment = collections.namedtuple("Alignment", ["answers", "exact", "enclosing", "skipped",
                                                 "examples"])
Alignment.__doc__ = """Training answers: how many, how many map to tokens exactly, how many
train on enclosing tokens (a boundary inside a token), how many are skipped (google's "Could not
find answer", or no token in the answer), and up to a few (qas_id, answer, decoded) examples of
the inexact ones."""

Encoded = collections.namedtuple("Encoded", ["arrays", "windows", "paragraphs", "alignment",
                                             "windowless"])
Encoded.__doc__ = """arrays: {feature name: np.ndarray} (module docstring); windows: [Window];
paragraphs: {context index: Paragraph}; alignment: Alignment (training) or None; windowless:
qas_ids of questions whose context has no token (no window: predicted empty)."""


def has_cjk(text):
  """Whether text holds a CJK ideograph (google's ranges)."""
  return any(tokenization.is_chinese_char(ord(c)) for c in text)


def google_words(context):
  """(doc_tokens, char_to_word_offset) of google's read_squad_examples: words split on
  SQUAD_WHITESPACE; every character maps to the word it is in (whitespace: the word before it,
  -1 before the first)."""
  bounds, char_to_word, after_space = [], [], True  # bounds: [start, end) of each word
  for offset, char in enumerate(context):
    if char in SQUAD_WHITESPACE:
      after_space = True
    else:
      if after_space:
        bounds.append([offset, offset + 1])
      else:
        bounds[-1][1] = offset + 1  # linear: a word of n characters is sliced once
      after_space = False
    char_to_word.append(len(bounds) - 1)
  return [context[start:end] for start, end in bounds], char_to_word


def paragraph(context, tokenizer):
  """The Paragraph of a context."""
  tokens = offsets.context_tokens(context, tokenizer)
  words, char_to_word = google_words(context)
  token_words = [char_to_word[start] for start in tokens.starts]
  word_tokens = [bisect.bisect_left(token_words, word) for word in range(len(words))]
  return Paragraph(context, tokens, words, char_to_word, token_words, word_tokens,
                   has_cjk(context))


def improve_answer_span(doc_tokens, input_start, input_end, tokenizer, orig_answer_text):
  """google's _improve_answer_span: the first (start, end) in [input_start, input_end], longest
  first, whose tokens joined by spaces equal the answer's own tokens; else the input span."""
  tok_answer_text = " ".join(tokenizer.tokenize(orig_answer_text))
  for new_start in range(input_start, input_end + 1):
    for new_end in range(input_end, new_start - 1, -1):
      if " ".join(doc_tokens[new_start:new_end + 1]) == tok_answer_text:
        return new_start, new_end
  return input_start, input_end


def _word_rule_span(para, answer, tokenizer):
  """(first, last) answer tokens by google's word rule, or None ("Could not find answer")."""
  start_word = para.char_to_word[answer.start]
  end_word = para.char_to_word[answer.start + len(answer.text) - 1]
  actual = " ".join(para.words[start_word:end_word + 1])
  if actual.find(" ".join(tokenization.whitespace_tokenize(answer.text))) == -1:
    return None
  first = para.word_tokens[start_word]
  if end_word < len(para.words) - 1:
    last = para.word_tokens[end_word + 1] - 1
  else:
    last = len(para.tokens.tokens) - 1
  return improve_answer_span(para.tokens.tokens, first, last, tokenizer, answer.text)


def answer_tokens(para, answer, tokenizer):
  """(first, last, exact) tokens of a training answer (module docstring), or None: skipped.
  exact: the tokens hold the answer's characters and nothing else."""
  end = answer.start + len(answer.text)
  by_chars = offsets.char_span_to_tokens(para.tokens, answer.start, end)
  if para.by_chars:
    return None if by_chars is None else (by_chars.first, by_chars.last, by_chars.aligned)
  span = _word_rule_span(para, answer, tokenizer)
  if span is None:
    return None
  exact = by_chars is not None and by_chars.aligned and span == (by_chars.first, by_chars.last)
  return span[0], span[1], exact


# google's windows and their max-context winners (token_windows.py: the ONNX client's too).
doc_spans = token_windows.doc_spans
max_context_spans = token_windows.max_context_spans


def _training_positions(span, answer_span, query_length, impossible):
  """(start, end) positions of one training window (google's rules)."""
  if impossible or answer_span is None:
    return 0, 0
  doc_start, doc_end = span[0], span[0] + span[1] - 1
  if not (answer_span[0] >= doc_start and answer_span[1] <= doc_end):
    return 0, 0
  offset = query_length + 2
  return answer_span[0] - doc_start + offset, answer_span[1] - doc_start + offset


def encode(squad_file, tokenizer, max_seq_length, doc_stride, max_query_length, training):
  """Encoded windows of a data.SquadFile (module docstring). training: positions and the
  Alignment report (the file was read with training=True)."""
  cls_id, sep_id = tokenizer.vocab[special.CLS], tokenizer.vocab[special.SEP]
  paragraphs, windows, rows, windowless = {}, [], [], []
  counts = collections.Counter()
  examples = []
  queries = tokenizer.tokenize_batch([q.question for q in squad_file.questions])
  for question_index, question in enumerate(squad_file.questions):
    if question.context_index not in paragraphs:
      paragraphs[question.context_index] = paragraph(
          squad_file.contexts[question.context_index], tokenizer)
    para = paragraphs[question.context_index]
    answer_span = None
    if training and not question.is_impossible:
      answer = question.answers[0]
      found = answer_tokens(para, answer, tokenizer)
      counts["answers"] += 1
      kind = "skipped" if found is None else "exact" if found[2] else "enclosing"
      counts[kind] += 1
      if kind != "exact" and len(examples) < 5:
        examples.append((question.qas_id, answer.text, None if found is None else
                         offsets.span_text(para.context, para.tokens, found[0], found[1])))
      if found is None:
        continue
      answer_span = found[:2]
    query = queries[question_index][:max_query_length]
    spans = doc_spans(len(para.tokens.tokens), max_seq_length - len(query) - 3, doc_stride)
    if not spans:
      windowless.append(question.qas_id)
      continue
    winners = max_context_spans(spans, len(para.tokens.tokens))
    query_ids = tokenizer.convert_tokens_to_ids(query)
    for span_index, (start, length) in enumerate(spans):
      doc_ids = tokenizer.convert_tokens_to_ids(para.tokens.tokens[start:start + length])
      ids = [cls_id] + query_ids + [sep_id] + doc_ids + [sep_id]
      positions = (_training_positions((start, length), answer_span, len(query),
                                       question.is_impossible) if training else (0, 0))
      rows.append((ids, len(query) + 2, positions))
      windows.append(Window(question_index, question.context_index, span_index, start, length,
                            len(query),
                            winners[start:start + length] == span_index))
  alignment = Alignment(counts["answers"], counts["exact"], counts["enclosing"],
                        counts["skipped"], examples) if training else None
  return Encoded(_arrays(rows, max_seq_length, training), windows, paragraphs, alignment,
                 windowless)


def _arrays(rows, max_seq_length, training):
  """{feature name: array} of [(ids, first segment-1 position, (start, end))]."""
  num = len(rows)
  arrays = {records.INPUT_IDS: np.zeros([num, max_seq_length], np.int32),
            records.INPUT_LEN: np.zeros([num], np.int32),
            records.SEGMENT_IDS: np.zeros([num, max_seq_length], np.int32)}
  if training:
    arrays[START_POSITIONS] = np.zeros([num], np.int32)
    arrays[END_POSITIONS] = np.zeros([num], np.int32)
  for row, (ids, segment_start, (start, end)) in enumerate(rows):
    arrays[records.INPUT_IDS][row, :len(ids)] = ids
    arrays[records.SEGMENT_IDS][row, segment_start:len(ids)] = 1
    arrays[records.INPUT_LEN][row] = len(ids)
    if training:
      arrays[START_POSITIONS][row], arrays[END_POSITIONS][row] = start, end
  return arrays


def google_maps(window, para):
  """google's (token_to_orig_map, token_is_max_context) of a window: {position: word index} and
  {position: bool} over its context positions."""
  offset = window.query_length + 2
  to_word = {offset + i: para.token_words[window.doc_start + i] for i in range(window.doc_length)}
  is_max = {offset + i: bool(window.is_max_context[i]) for i in range(window.doc_length)}
  return to_word, is_max
