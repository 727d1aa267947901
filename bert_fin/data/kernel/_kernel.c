/* The fast pipeline's records in C: bert_fin/data/kernel/dispatch.py is the only caller.
 *
 * Contract: for a block of documents and one random.Random state, `dupe_records` returns exactly
 * the bytes of kernel_dispatch.ReferenceBlock for positions 0..n-1 in turn
 * (instances.create_document_instances + ExampleEncoder.encode + TFRecord framing), making the same
 * random draws in the same order. The draws are CPython's: MT19937 with random() =
 * (a >> 5, b >> 6) / 2**53 and getrandbits(k) in 32-bit words, least significant word first, run
 * on the 625-word internal state of random.Random.getstate(); the new state is returned so the
 * caller's generator ends where the Python path would leave it. Tested byte for byte against the
 * Python path (tests/test_kernel.py). With `dynamic` (make_block), the records are
 * dynamic-masking records (UnmaskedExampleEncoder's: unmasked ids + word_starts) and no masking
 * draws are made: only the pairing consumes the generator.
 *
 * Example bytes: the variable parts (varints of ids, positions, labels; segment bytes; zero
 * padding) are written here; the constant entry headers come from ExampleEncoder's precomputed
 * tables, so the protobuf layout is defined once, in writer.py.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "_kernel_random.h"
#include "_kernel_crc.h"
#include "_kernel_block.h"
#include "_kernel_shuffle.h"
#include "_kernel_record.h"
#include "_kernel_unmasked.h"

/* ---- one instance ------------------------------------------------------------------------------ */

/* Groups of tokens [lo, hi) of a document (starts relative to the block): boundaries appended to
 * begin/end arrays from *count on; the first token always begins a group. */
static void add_groups(const uint8_t *starts, long lo, long hi, long shift, int32_t *begin,
                       int32_t *end, long *count) {
  long g = *count;
  for (long i = lo; i < hi; i++) {
    if (i == lo || starts[i]) {
      if (g > *count) end[g - 1] = (int32_t)(i + shift);
      begin[g++] = (int32_t)(i + shift);
    }
  }
  if (g > *count) end[g - 1] = (int32_t)(hi + shift);
  *count = g;
}

/* Masks one segment (document tokens [lo, hi) at instance positions lo + shift ...): writes the
 * varints of the output ids to ids_out, the positions and labels of chosen tokens, and counts the
 * predicted positions that hold [MASK] (stats.py's masked_positions_with_mask_token); returns the
 * number of bytes written to ids_out. */
static size_t mask_segment(const Block *block, Mt *mt, const int32_t *ids, long lo, long hi,
                           long shift, Scratch *scratch, uint8_t *ids_out, size_t *positions_size,
                           size_t *labels_size, long *num_predictions,
                           long *masked_positions_with_mask_token) {
  size_t written = 0;
  const double scale = block->random_scale * (double)block->num_random_ids;
  const long last = (long)block->num_random_ids - 1;
  for (long i = lo; i < hi; i++) {
    long position = i + shift;
    int32_t id = ids[i], out = id;
    if (scratch->chosen[position]) {
      double draw = mt_random(mt);
      if (draw < block->mask_below) {
        out = (int32_t)block->mask_id;
        (*masked_positions_with_mask_token)++;
      } else if (draw < block->random_from) {
        *masked_positions_with_mask_token += id == block->mask_id;
      } else {
        long r = (long)((draw - block->random_from) * scale);
        out = block->random_ids[r < last ? r : last];
        *masked_positions_with_mask_token += out == block->mask_id;
      }
      *positions_size += put_varint(scratch->positions_payload + *positions_size,
                                    (uint64_t)position);
      *labels_size += put_varint(scratch->labels_payload + *labels_size, (uint64_t)id);
      (*num_predictions)++;
    }
    written += put_varint(ids_out + written, (uint64_t)out);
  }
  return written;
}

/* Masks and encodes [CLS] A [SEP] B [SEP] (pair) or [CLS] A [SEP] (B unused, label 0); returns
 * the framed record (new reference) or NULL. */
static PyObject *make_record(const Block *block, Mt *mt, Scratch *scratch, Py_ssize_t a_base,
                             long a_lo, long a_hi, Py_ssize_t b_base, long b_lo, long b_hi,
                             int pair, int random_next) {
  const long s = block->max_seq_length, p = block->max_predictions;
  const long na = a_hi - a_lo, nb = pair ? b_hi - b_lo : 0, n = pair ? na + nb + 3 : na + 2;
  const int32_t *a_ids = block->ids + a_base, *b_ids = block->ids + b_base;
  const uint8_t *a_starts = block->starts + a_base, *b_starts = block->starts + b_base;
  const long budget = block->budgets[n];
  long groups = 0;

  /* masking.choose_groups over A's groups then B's: a lazy Fisher-Yates, one draw per visit */
  add_groups(a_starts, a_lo, a_hi, 1 - a_lo, scratch->group_begin, scratch->group_end, &groups);
  if (pair)
    add_groups(b_starts, b_lo, b_hi, na + 2 - b_lo, scratch->group_begin, scratch->group_end,
               &groups);
  memset(scratch->chosen, 0, n);
  for (long i = 0; i < groups; i++) scratch->order[i] = (int32_t)i;
  long count = 0;
  for (long i = 0; i < groups; i++) {
    long j = i + (long)(mt_random(mt) * (double)(groups - i));
    int32_t group = scratch->order[j];
    scratch->order[j] = scratch->order[i];
    long size = scratch->group_end[group] - scratch->group_begin[group];
    if (count + size > budget) continue;
    memset(scratch->chosen + scratch->group_begin[group], 1, size);
    count += size;
    if (count >= budget) break;
  }

  /* 80/10/10 (block->mask_below, random_from) in position order (A's chosen tokens, then B's)
   * while encoding input_ids */
  uint8_t *ids_out = scratch->ids_payload;
  size_t ids_size = 0, positions_size = 0, labels_size = 0;
  long k = 0, masked_positions_with_mask_token = 0;
  ids_size += put_varint(ids_out + ids_size, (uint64_t)block->cls_id);
  ids_size += mask_segment(block, mt, a_ids, a_lo, a_hi, 1 - a_lo, scratch, ids_out + ids_size,
                           &positions_size, &labels_size, &k, &masked_positions_with_mask_token);
  ids_size += put_varint(ids_out + ids_size, (uint64_t)block->sep_id);
  if (pair) {
    ids_size += mask_segment(block, mt, b_ids, b_lo, b_hi, na + 2 - b_lo, scratch,
                             ids_out + ids_size, &positions_size, &labels_size, &k,
                             &masked_positions_with_mask_token);
    ids_size += put_varint(ids_out + ids_size, (uint64_t)block->sep_id);
  }

  /* ExampleEncoder.encode_packed: the body is assembled in scratch, then framed */
  const long pad_s = s - n, pad_p = p - k;
  uint8_t *body = scratch->record, *out = body;
  Py_ssize_t w;
#define PUT_TABLE(which, index) \
  if ((w = put_table_item(block, which, index, out)) < 0) return NULL; \
  out += w;
  PUT_TABLE(T_IDS_HEADERS, (Py_ssize_t)(ids_size + pad_s));
  memcpy(out, ids_out, ids_size);
  out += ids_size;
  memset(out, 0, pad_s);
  out += pad_s;
  if (block->tables[T_MASK_ENTRIES] != Py_None) {
    PUT_TABLE(T_MASK_ENTRIES, n);
  }
  PUT_TABLE(T_LEN_ENTRIES, n);
  PyObject *prefix = block->tables[T_SEGMENT_PREFIX];
  memcpy(out, PyBytes_AS_STRING(prefix), PyBytes_GET_SIZE(prefix));
  out += PyBytes_GET_SIZE(prefix);
  out = put_segment_ids(out, na, nb, pair, pad_s);
  PUT_TABLE(T_POSITIONS_HEADERS, (Py_ssize_t)(positions_size + pad_p));
  memcpy(out, scratch->positions_payload, positions_size);
  out += positions_size;
  memset(out, 0, pad_p);
  out += pad_p;
  PUT_TABLE(T_LABELS_HEADERS, (Py_ssize_t)(labels_size + pad_p));
  memcpy(out, scratch->labels_payload, labels_size);
  out += labels_size;
  memset(out, 0, pad_p);
  out += pad_p;
  PUT_TABLE(T_WEIGHT_ENTRIES, k);
  PUT_TABLE(T_LABEL_ENTRIES, random_next);
#undef PUT_TABLE
  PyObject *framed = frame_example(body, out - body);
  if (framed == NULL) return NULL;
  count_instance(scratch, a_ids, a_lo, a_hi, b_ids, b_lo, pair ? b_hi : b_lo, block->unk_id, n,
                 random_next);
  scratch->masked_tokens += k;
  scratch->masked_positions_with_mask_token += masked_positions_with_mask_token;
  return framed;
}

/* A static (masks drawn here) or dynamic-masking record, by block->dynamic. */
static PyObject *make_any_record(const Block *block, Mt *mt, Scratch *scratch, Py_ssize_t a_base,
                                 long a_lo, long a_hi, Py_ssize_t b_base, long b_lo, long b_hi,
                                 int pair, int random_next) {
  if (block->dynamic)
    return make_unmasked_record(block, scratch, a_base, a_lo, a_hi, b_base, b_lo, b_hi, pair,
                                random_next);
  return make_record(block, mt, scratch, a_base, a_lo, a_hi, b_base, b_lo, b_hi, pair,
                     random_next);
}

/* Appends a new record reference to records (stealing it); -1 if it is NULL or on failure. */
static int append_record(PyObject *records, PyObject *record) {
  if (record == NULL) return -1;
  int failed = PyList_Append(records, record);
  Py_DECREF(record);
  return failed ? -1 : 0;
}

/* ---- instances.nsp_spans for one document -------------------------------------------------------- */

/* google's truncate_seq_pair counts (instances.truncation_counts) */
static void truncation_counts(long len_a, long len_b, long max_num_tokens, long *removed_a,
                              long *removed_b) {
  long excess = len_a + len_b - max_num_tokens;
  *removed_a = *removed_b = 0;
  if (excess <= 0) return;
  if (len_a > len_b) *removed_a = excess < len_a - len_b ? excess : len_a - len_b;
  else if (len_b > len_a) *removed_b = excess < len_b - len_a ? excess : len_b - len_a;
  excess -= *removed_a + *removed_b;
  *removed_a += excess / 2;
  *removed_b += (excess + 1) / 2;
}

/* Appends the records of document `position` to `records`; returns how many, or -1. */
static long document_records(const Block *block, Mt *mt, Scratch *scratch, Py_ssize_t position,
                             PyObject *records) {
  const int32_t *offsets = block->offsets + block->offset_base[position];
  const long num_sentences = block->num_sentences[position];
  const long max_num_tokens = block->max_seq_length - 3;
  const Py_ssize_t base = block->token_base[position];
  long made = 0;
  long target = max_num_tokens;
  if (mt_random(mt) < block->short_seq_prob) target = uniform_int(mt, 2, max_num_tokens);
  long first = 0;
  for (long i = 0; i < num_sentences; i++) {
    if (!(i == num_sentences - 1 || offsets[i + 1] - offsets[first] >= target)) continue;
    long chunk = i + 1 - first;
    long a_end = chunk >= 2 ? uniform_int(mt, 1, chunk - 1) : 1;
    long a_begin = offsets[first], a_stop = offsets[first + a_end];
    Py_ssize_t b_base;
    long b_begin, b_stop;
    int random_next;
    if (chunk == 1 || mt_random(mt) < block->random_next_below) {
      random_next = 1;
      long target_b = target - (a_stop - a_begin);
      Py_ssize_t other = position;
      if (block->num_documents > 1) {
        other = uniform_int(mt, 0, block->num_documents - 2);
        other += other >= position;
      }
      const int32_t *b_offsets = block->offsets + block->offset_base[other];
      long b_sentences = block->num_sentences[other];
      long start = uniform_int(mt, 0, b_sentences - 1);
      b_begin = b_offsets[start];
      /* bisect_left(offsets, b_begin + target_b, start + 1) over offsets[0..b_sentences] */
      long lo = start + 1, hi = b_sentences + 1;
      while (lo < hi) {
        long mid = (lo + hi) / 2;
        if (b_offsets[mid] < b_begin + target_b) lo = mid + 1;
        else hi = mid;
      }
      b_stop = b_offsets[lo < b_sentences ? lo : b_sentences];
      b_base = block->token_base[other];
      i -= chunk - a_end; /* put the unused sentences back */
    } else {
      random_next = 0;
      b_base = base;
      b_begin = a_stop;
      b_stop = offsets[i + 1];
    }
    long removed_a, removed_b;
    truncation_counts(a_stop - a_begin, b_stop - b_begin, max_num_tokens, &removed_a, &removed_b);
    long front_a = removed_a ? mt_random_bits_popcount(mt, removed_a) : 0;
    long front_b = removed_b ? mt_random_bits_popcount(mt, removed_b) : 0;
    if (append_record(records, make_any_record(block, mt, scratch, base, a_begin + front_a,
                                           a_stop - (removed_a - front_a), b_base,
                                           b_begin + front_b, b_stop - (removed_b - front_b), 1,
                                           random_next)) < 0)
      return -1;
    made++;
    first = i + 1;
  }
  return made;
}

/* instances.full_sentence_spans (objective roberta): contiguous sentences of document `position`
 * up to a target length, a sentence longer than the maximum cut into maximal pieces; each span is
 * [CLS] X [SEP]. Appends the records to `records`; returns how many, or -1. */
static long document_full_sentence_records(const Block *block, Mt *mt, Scratch *scratch,
                                           Py_ssize_t position, PyObject *records) {
  const int32_t *offsets = block->offsets + block->offset_base[position];
  const long num_sentences = block->num_sentences[position];
  const long max_num_tokens = block->max_seq_length - 2;
  const Py_ssize_t base = block->token_base[position];
  long made = 0, begin = 0, length = 0;
  long target = max_num_tokens;
  if (mt_random(mt) < block->short_seq_prob) target = uniform_int(mt, 2, max_num_tokens);
  for (long j = 0; j < num_sentences; j++) {
    for (long lo = offsets[j]; lo < offsets[j + 1]; lo += max_num_tokens) {
      long hi = lo + max_num_tokens < offsets[j + 1] ? lo + max_num_tokens : offsets[j + 1];
      if (length > 0 && length + (hi - lo) > target) {
        if (append_record(records, make_any_record(block, mt, scratch, base, begin,
                                                   begin + length, base, 0, 0, 0, 0)) < 0)
          return -1;
        made++;
        length = 0;
      }
      if (length == 0) begin = lo; /* pieces are consecutive: a span is one token range */
      length += hi - lo;
    }
  }
  if (length > 0) {
    if (append_record(records, make_any_record(block, mt, scratch, base, begin, begin + length,
                                               base, 0, 0, 0, 0)) < 0)
      return -1;
    made++;
  }
  return made;
}

static void scratch_free(Scratch *scratch) {
  free(scratch->group_begin);
  free(scratch->group_end);
  free(scratch->order);
  free(scratch->chosen);
  free(scratch->word_starts);
  free(scratch->ids_payload);
  free(scratch->positions_payload);
  free(scratch->labels_payload);
  free(scratch->record);
  free(scratch->histogram);
}

static int scratch_init(Scratch *scratch, const Block *block) {
  size_t s = (size_t)block->max_seq_length, p = (size_t)block->max_predictions;
  memset(scratch, 0, sizeof(*scratch));
  scratch->group_begin = malloc(sizeof(int32_t) * s);
  scratch->group_end = malloc(sizeof(int32_t) * s);
  scratch->order = malloc(sizeof(int32_t) * s);
  scratch->chosen = malloc(s);
  scratch->word_starts = malloc(s);
  scratch->ids_payload = malloc(s * 5);
  scratch->positions_payload = malloc(p * 5);
  scratch->labels_payload = malloc(p * 5);
  /* generous: every table item is bounded by the table's longest item */
  size_t table_bytes = 0;
  for (int i = 0; i < NUM_TABLES; i++) {
    PyObject *table = block->tables[i];
    size_t longest = 0;
    if (table == Py_None) continue;
    if (PyBytes_Check(table)) {
      longest = PyBytes_GET_SIZE(table);
    } else {
      for (Py_ssize_t j = 0; j < PyList_GET_SIZE(table); j++) {
        size_t size = PyBytes_GET_SIZE(PyList_GET_ITEM(table, j));
        if (size > longest) longest = size;
      }
    }
    table_bytes += longest;
  }
  scratch->record_capacity = 64 + table_bytes + 10 * s + 16 * p;
  scratch->record = malloc(scratch->record_capacity);
  scratch->histogram = calloc(s + 1, sizeof(long long));
  if (!scratch->group_begin || !scratch->group_end || !scratch->order || !scratch->chosen
      || !scratch->word_starts
      || !scratch->ids_payload || !scratch->positions_payload || !scratch->labels_payload
      || !scratch->record || !scratch->histogram) {
    scratch_free(scratch);
    PyErr_NoMemory();
    return -1;
  }
  return 0;
}

/* dupe_records(block, state) -> (records, produced, counts, histogram, new_state)
 *   records: list of framed records of documents 0..n-1 in order; produced: bytes [n], 1 where a
 *   document gave a record; counts: (instances, tokens, unk_tokens, masked_tokens,
 *   masked_kept_as_mask, next_sentence_random); histogram: list [max_seq_length + 1]. */
static PyObject *dupe_records(PyObject *self, PyObject *args) {
  PyObject *capsule, *state;
  if (!PyArg_ParseTuple(args, "OO!", &capsule, &PyTuple_Type, &state)) return NULL;
  const Block *block = PyCapsule_GetPointer(capsule, "bert_fin.kernel_block");
  if (block == NULL) return NULL;
  Mt mt;
  if (state_from_tuple(state, &mt) < 0) return NULL;
  Scratch scratch;
  if (scratch_init(&scratch, block) < 0) return NULL;
  PyObject *records = PyList_New(0), *result = NULL;
  PyObject *produced = PyBytes_FromStringAndSize(NULL, block->num_documents);
  if (records == NULL || produced == NULL) goto done;
  for (Py_ssize_t position = 0; position < block->num_documents; position++) {
    long made = block->full_sentences
                    ? document_full_sentence_records(block, &mt, &scratch, position, records)
                    : document_records(block, &mt, &scratch, position, records);
    if (made < 0) goto done;
    PyBytes_AS_STRING(produced)[position] = made > 0;
  }
  PyObject *histogram = PyList_New(block->max_seq_length + 1);
  if (histogram == NULL) goto done;
  for (long n = 0; n <= block->max_seq_length; n++) {
    PyObject *v = PyLong_FromLongLong(scratch.histogram[n]);
    if (v == NULL) { Py_DECREF(histogram); goto done; }
    PyList_SET_ITEM(histogram, n, v);
  }
  PyObject *new_state = state_to_tuple(&mt);
  if (new_state == NULL) { Py_DECREF(histogram); goto done; }
  result = Py_BuildValue("(OO(LLLLLL)NN)", records, produced, scratch.instances, scratch.tokens,
                         scratch.unk_tokens, scratch.masked_tokens,
                         scratch.masked_positions_with_mask_token,
                         scratch.next_sentence_random, histogram, new_state);
done:
  Py_XDECREF(records);
  Py_XDECREF(produced);
  scratch_free(&scratch);
  return result;
}

/* masked_crc32c(data, hardware) -> int: for tests of both CRC paths */
static PyObject *masked_crc32c_py(PyObject *self, PyObject *args) {
  Py_buffer data;
  int hardware;
  if (!PyArg_ParseTuple(args, "y*p", &data, &hardware)) return NULL;
  uint32_t crc = hardware ? masked_crc32c(data.buf, data.len)
                          : mask_crc(crc32c_table(data.buf, data.len));
  PyBuffer_Release(&data);
  return PyLong_FromUnsignedLong(crc);
}

static PyMethodDef methods[] = {
    {"make_block", make_block, METH_VARARGS,
     "make_block(documents, full_sentences, max_seq_length, max_predictions_per_seq, "
     "short_seq_prob, random_next_below, mask_below, random_from, random_scale, cls_id, sep_id, "
     "mask_id, unk_id, random_ids, budgets, encoder_tables, "
     "dynamic=False) -> block capsule"},
    {"dupe_records", dupe_records, METH_VARARGS,
     "dupe_records(block, mt_state) -> (records, produced, counts, histogram, new_mt_state)"},
    {"make_window", make_window, METH_VARARGS, "make_window(window) -> shuffle window capsule"},
    {"window_push", window_push, METH_VARARGS,
     "window_push(window, mt_state, blob, lengths) -> (emitted_blob, emitted_lengths, new_state)"},
    {"window_drain", window_drain, METH_VARARGS,
     "window_drain(window) -> list of the records held, in slot order (empties the window)"},
    {"deal_records", deal_records, METH_VARARGS,
     "deal_records(blob, lengths, num_files, first) -> list of num_files bytes"},
    {"masked_crc32c", masked_crc32c_py, METH_VARARGS,
     "masked_crc32c(data, hardware) -> TFRecord's masked CRC32C (hardware=False: the table path)"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_kernel",
                                    "The fast pipeline's records in C (see dispatch.py).",
                                    -1, methods};

PyMODINIT_FUNC PyInit__kernel(void) {
  crc_init();
  return PyModule_Create(&module);
}
