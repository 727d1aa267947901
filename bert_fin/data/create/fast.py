"""create_pretraining_data, fast mode: streaming, multiprocess, whole-word masking, deterministic.

Data flow (memory bounded by block_docs, the in-flight blocks and shuffle_window, not the corpus):
  sentence_documents.iter_documents  --blocks of `block_docs` documents-->  workers (ordered_map):
      segment each sentence once (jieba/rjieba + user dict), word-piece each word (a WWM group),
      then for each dupe: one random.Random seeded from hash(random_seed, first document index of
      the block, dupe) drives the block's documents in order through kernel_dispatch.make_block
      (the C kernel, or the pure-Python reference instances.create_document_instances +
      ExampleEncoder.encode: the same bytes) -> TFRecord-framed serialized Examples
  --> parent: bounded shuffle window (random.Random(random_seed)) --> one ShardedRecordWriter
      (workers return TFRecord-framed bytes packed in one blob per block; the parent only shuffles
      and deals them to the files, in C when the kernel is built: shuffle.py)
  --> `<prefix>.stats.json`.
The output therefore depends only on the input, the flags and the seed -- never on num_workers,
nor on the number of MPI ranks (data/multihost/create_ranks.py runs the same blocks on several
ranks). Random next sentences (objective bert) come from the other documents of the same block.
With --masking=dynamic the records are unmasked, with word_starts (records/schema.py), and the
generator drives only the pairing.
"""
import hashlib
import itertools
import logging
import operator
import os
import random
import struct
import time

from bert_fin import io_utils
from bert_fin.data import parallel
from bert_fin.data import shuffle as shuffle_lib
from bert_fin.data import writer as writer_lib
from bert_fin.data.create import common
from bert_fin.data.create import sentence_documents
from bert_fin.data.create import faithful
from bert_fin.data.create import instances as instances_lib
from bert_fin.data.create import masking
from bert_fin.data.create import options as options_lib
from bert_fin.data.create import stats as stats_lib
from bert_fin.data.kernel import dispatch as kernel_dispatch
from bert_fin.tokenization import special_tokens as special

_LOG = logging.getLogger(__name__)
_FIRST, _SECOND = operator.itemgetter(0), operator.itemgetter(1)
_WORD_CACHE_ENTRIES = 200000  # per worker; bounds memory whatever the corpus size


def document_rng(seed, document_index, dupe):
  """random.Random for one (document, dupe), independent of process, worker and order.

  Seeded with a 128-bit BLAKE2b hash of (seed, document_index, dupe) (cheaper than numpy's
  SeedSequence and as well mixed; each call gives a fresh, unshared state -- no fork-inherited
  RNG).

  Args:
    seed: --random_seed.
    document_index: the pipeline passes a block's first document index: one stream per
      (block, dupe).
    dupe: the dupe number, 0 <= dupe < dupe_factor.

  Returns:
    a new random.Random.
  """
  key = struct.pack("<qqq", seed, document_index, dupe)
  return random.Random(int.from_bytes(hashlib.blake2b(key, digest_size=16).digest(), "little"))


class _Worker(object):
  """Per-process state: tokenizer, segmenter, instance config, encoder.

  Args:
    options: the run's options (options.py).

  Raises:
    RuntimeError: --kernel c without the C extension (kernel_dispatch.resolve).
  """

  def __init__(self, options):
    self.options = options
    self.kernel = kernel_dispatch.resolve(options.kernel)
    self.tokenizer = common.load_tokenizer(options.vocab_file, options.do_lower_case,
                                    options.fast_tokenizer)
    self.vocab = self.tokenizer.vocab
    ids = special.ids(self.vocab)
    self.unk_id, self.mask_id = ids[special.UNK], ids[special.MASK]
    self.sentence_limit = common.sentence_limit(options)
    self.segmenter = None
    self._word_cache = {}
    if options.do_whole_word_mask:
      from bert_fin.text import segment
      self.segmenter = segment.make_segmenter(options.segmenter, options.user_dict)
    self.masking = masking.masking_config(self.vocab, options.masked_lm_prob,
                                          options.max_predictions_per_seq)
    dynamic = options.masking == "dynamic"
    self.config = instances_lib.InstanceConfig(
        options.max_seq_length, options.max_predictions_per_seq, options.masked_lm_prob,
        options.short_seq_prob, options.objective, ids[special.CLS], ids[special.SEP], self.mask_id,
        self.masking.random_ids, dynamic)
    if dynamic:
      self.encoder = writer_lib.UnmaskedExampleEncoder(options.max_seq_length,
                                                       max_value=max(self.vocab.values()))
    else:
      self.encoder = writer_lib.ExampleEncoder(
          options.max_seq_length, options.max_predictions_per_seq, options.write_input_mask,
          max_value=max(self.vocab.values()))

  def _cache_words(self, words):
    """Ensures the bounded per-worker cache holds (ids, starts) tuples for every word of the
    iterable words: the word's pieces (one WWM group) and True for its first piece only. Misses go
    to tokenizer.tokenize_words in one call."""
    cache = self._word_cache
    distinct = set(words)
    missing = [w for w in distinct if w not in cache]
    if missing:
      if len(cache) + len(missing) > _WORD_CACHE_ENTRIES:
        cache.clear()  # then every word of this call is missing, not only the unseen ones
        missing = list(distinct)
      vocab = self.vocab
      for word, pieces in zip(missing, self.tokenizer.tokenize_words(missing)):
        ids = tuple(vocab[p] for p in pieces)
        cache[word] = (ids, (True,) + (False,) * (len(ids) - 1) if ids else ())

  def tokenize_documents(self, documents):
    """documents: list of list[str] sentences -> list of list[instances.Sentence] (empty sentences
    dropped), one call per block so that unseen words are word-pieced in one batch.

    Whole-word mode: each sentence is segmented once, each word word-pieced on its own; a word's
    first piece has starts=True. Otherwise google's tokenize per sentence, every piece a group.
    """
    vocab, chain, out = self.vocab, itertools.chain.from_iterable, []
    if self.segmenter is None:
      pieces_per_sentence = iter(self.tokenizer.tokenize_batch(list(chain(documents))))
      for sentences in documents:
        out.append([instances_lib.Sentence([vocab[p] for p in pieces], [True] * len(pieces))
                    for pieces in itertools.islice(pieces_per_sentence, len(sentences))
                    if pieces])
      return out
    cut = self.segmenter.cut
    words = [list(map(cut, sentences)) for sentences in documents]
    self._cache_words(chain(chain(words)))
    lookup, ids_of, starts_of = self._word_cache.__getitem__, _FIRST, _SECOND
    for words_per_sentence in words:
      document = []
      for sentence_words in words_per_sentence:
        entries = list(map(lookup, sentence_words))
        ids = list(chain(map(ids_of, entries)))
        if ids:
          document.append(instances_lib.Sentence(ids, list(chain(map(starts_of, entries)))))
      out.append(document)
    return out

  def tokenize_document(self, sentences):
    """tokenize_documents for one document."""
    return self.tokenize_documents([sentences])[0]

  def process_block(self, block):
    """Makes the records of one block of documents, every dupe.

    Args:
      block: (first_document_index, [SentenceDocument]) (iter_blocks).

    Returns:
      (list of TFRecord-framed serialized Examples, the block's PretrainingStats).
    """
    first_index, raw_documents = block
    stats = stats_lib.PretrainingStats()
    usable = []
    readable = [raw for raw in raw_documents if not raw.skip_reason]
    tokenized = iter(self.tokenize_documents([raw.sentences for raw in readable]))
    for raw in raw_documents:
      if raw.skip_reason:
        stats.add_skip(raw.skip_reason)
        continue
      sentences = next(tokenized)
      if not sentences:
        stats.add_skip("empty_after_tokenization")
        continue
      stats.count_overlong((len(sentence.ids) for sentence in sentences), self.sentence_limit)
      usable.append(sentences)
    produced = [False] * len(usable)
    serialized = []
    dupe_records = kernel_dispatch.make_block(usable, self.encoder, self.config, self.unk_id,
                                         self.kernel).dupe_records
    for dupe in range(self.options.dupe_factor):
      # one stream per (block, dupe): blocks are cut by block_docs alone, so the output does not
      # depend on the number of workers, and seeding costs once per block, not per document
      rng = document_rng(self.options.random_seed, first_index, dupe)
      records, made = dupe_records(rng, stats)
      serialized += records
      produced = [a or b for a, b in zip(produced, made)]
    for ok in produced:
      if ok:
        stats.add_used()
      else:
        stats.add_skip("no_instances")
    return serialized, stats


_WORKER = None


def init_worker(options):
  """Builds the process-global worker state (before forking, see run_fast)."""
  global _WORKER
  os.environ["TOKENIZERS_PARALLELISM"] = "false"  # no tokenizer threads: fork-safe
  _WORKER = _Worker(options)
  # warm up lazily built tokenizer/segmenter state once here rather than in every forked worker
  # (the word cache it fills is a pure function of the word)
  _WORKER.tokenize_document(["\u9884\u70ed warm-up 1."])


def worker():
  """The process-global worker state init_worker built (tokenizer, segmenter, kernel, masking)."""
  return _WORKER


def process_block_packed(block):
  """process_block for the worker pool, with the records packed for the trip to the parent.

  The parent makes no Python object per record: its shuffle and dealing run on the packed form
  (shuffle.py).

  Args:
    block: (first_document_index, [SentenceDocument]).

  Returns:
    (blob, lengths, stats) where blob is the records concatenated and lengths their byte lengths
    (array "I" bytes).
  """
  records, stats = _WORKER.process_block(block)
  return shuffle_lib.pack_records(records) + (stats,)


def iter_blocks(raw_documents, block_docs):
  """Groups the document stream into (first_document_index, [SentenceDocument]) blocks.

  Args:
    raw_documents: iterable of SentenceDocument.
    block_docs: documents per block (the last block may hold fewer).

  Yields:
    (first_document_index, list of block_docs SentenceDocuments).
  """
  block, first = [], 0
  for index, raw in enumerate(raw_documents):
    if not block:
      first = index
    block.append(raw)
    if len(block) == block_docs:
      yield first, block
      block = []
  if block:
    yield first, block


def run_fast(options):
  """Fast mode end to end; returns the stats dict (also written to `<prefix>.stats.json`)."""
  paths, stats_path = writer_lib.output_paths(options.output_file, options.num_output_files)
  input_paths = io_utils.expand_file_patterns(options.input_file)
  num_workers = options.num_workers or parallel.default_num_workers()
  if options.masking == "dynamic":
    _LOG.info("--masking=dynamic: unmasked records with word_starts, each document paired %d "
              "time(s) (--dupe_factor); training draws the masks every epoch",
              options.dupe_factor)
  position = sentence_documents.ReadPosition(input_paths)
  raw_documents = sentence_documents.iter_documents(input_paths, options.input_format, position)
  stats = stats_lib.PretrainingStats()
  start = time.time()
  # Built once here: forked workers inherit the ready tokenizer/segmenter (copy-on-write) instead of
  # each rebuilding them; the worker state holds no RNG (randomness is per block and dupe).
  init_worker(options)
  shuffler = shuffle_lib.make_shuffler(options.shuffle_window, random.Random(options.random_seed),
                                       _WORKER.kernel)
  blocks = iter_blocks(raw_documents, options.block_docs)
  # ordered_map forks first, before tqdm starts its monitor thread
  with parallel.ordered_map(process_block_packed, blocks, num_workers) as results, \
      writer_lib.ShardedRecordWriter(paths) as out, common.progress_bar(
          options.progress, unit="B", total=position.total) as bar:
    for blob, lengths, block_stats in results:
      stats.merge(block_stats)
      blob, lengths = shuffler.push_packed(blob, lengths)
      out.write_dealt(shuffle_lib.deal_records(blob, lengths, len(paths), out.next_file,
                                               _WORKER.kernel),
                      shuffle_lib.count_records(lengths))
      common.advance_to(bar, position)  # input bytes read (a little ahead: blocks in flight)
      bar.set_postfix(documents=stats.documents_read, instances=stats.instances,
                      inst_per_s="%.0f" % (stats.instances / max(time.time() - start, 1e-9)))
    out.write_many(shuffler.drain())
    common.check_produced(stats)  # raising here discards the temp shards: nothing written
    counts = list(out.counts)
  return common.finish(options, stats, stats_path, paths, counts, time.time() - start,
                           mode="fast", num_workers=num_workers, segmenter=_WORKER.segmenter,
                           record_kernel=_WORKER.kernel, masking_config=_WORKER.masking)


def run(options):
  """create_pretraining_data: faithful (google's exact algorithm) or fast mode.

  Args:
    options: the run's options (options.py).

  Returns:
    the stats dict (also written to `<prefix>.stats.json`).

  Raises:
    ValueError: one line naming the flag or file: invalid options (options.validate_options),
      what preflight finds, or an input that gave no instance.
    RuntimeError: --kernel c without the C extension.
  """
  options_lib.validate_options(options)
  common.preflight(options)
  if options.faithful:
    return faithful.run_faithful(options)
  return run_fast(options)
