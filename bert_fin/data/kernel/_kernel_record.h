/* The pieces every record of _kernel.c shares: the per-call scratch and statistics, varints,
 * encoder table look-ups, TFRecord framing and the per-instance counts. Included once, by
 * _kernel.c, after _kernel_block.h and _kernel_crc.h. */
#ifndef BERT_FIN_KERNEL_RECORD_H
#define BERT_FIN_KERNEL_RECORD_H

typedef struct {
  /* per-call scratch, sized by max_seq_length / max_predictions */
  int32_t *group_begin, *group_end, *order;
  uint8_t *chosen; /* [max_seq_length]: chosen[i] for instance position i */
  uint8_t *word_starts; /* [max_seq_length]: dynamic-masking records' word_starts bytes */
  uint8_t *ids_payload, *positions_payload, *labels_payload, *record;
  size_t record_capacity;
  /* statistics, named as stats.PretrainingStats (returned for its add_totals) */
  long long instances, tokens, unk_tokens, masked_tokens, masked_positions_with_mask_token,
      next_sentence_random;
  long long *histogram; /* [max_seq_length + 1] */
} Scratch;

static size_t put_varint(uint8_t *out, uint64_t v) {
  size_t n = 0;
  while (v >= 0x80) {
    out[n++] = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  out[n++] = (uint8_t)v;
  return n;
}

/* Appends the bytes of item `index` of encoder table `which` at out; returns bytes written or -1. */
static uint8_t *put_segment_ids(uint8_t *out, long na, long nb, int pair, long pad_s) {
  /* the segment_ids payload bytes: 0 for [CLS] A [SEP], 1 for B [SEP] (pair), 0 padding;
   * returns the position after them */
  memset(out, 0, na + 2);
  out += na + 2;
  if (pair) {
    memset(out, 1, nb + 1);
    out += nb + 1;
  }
  memset(out, 0, pad_s);
  return out + pad_s;
}

static Py_ssize_t put_table_item(const Block *block, int which, Py_ssize_t index, uint8_t *out) {
  PyObject *table = block->tables[which];
  if (index < 0 || index >= PyList_GET_SIZE(table)) {
    PyErr_Format(PyExc_ValueError, "encoder table %d has no entry %zd (payload too long)", which,
                 index);
    return -1;
  }
  PyObject *item = PyList_GET_ITEM(table, index);
  Py_ssize_t size = PyBytes_GET_SIZE(item);
  memcpy(out, PyBytes_AS_STRING(item), size);
  return size;
}

/* The TFRecord-framed bytes of the Example whose Features body is body[0..body_size) (new
 * reference, or NULL). */
static PyObject *frame_example(const uint8_t *body, size_t body_size) {
  uint8_t example_header[11];
  example_header[0] = 0x0a;
  size_t example_header_size = 1 + put_varint(example_header + 1, body_size);
  size_t record_size = example_header_size + body_size;
  PyObject *framed = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(12 + record_size + 4));
  if (framed == NULL) return NULL;
  uint8_t *frame = (uint8_t *)PyBytes_AS_STRING(framed);
  for (int i = 0; i < 8; i++) frame[i] = (uint8_t)((uint64_t)record_size >> (8 * i));
  put_u32le(frame + 8, masked_crc32c(frame, 8));
  memcpy(frame + 12, example_header, example_header_size);
  memcpy(frame + 12 + example_header_size, body, body_size);
  put_u32le(frame + 12 + record_size, masked_crc32c(frame + 12, record_size));
  return framed;
}

/* stats of one instance of n tokens: [UNK] among a_ids[a_lo..a_hi) and b_ids[b_lo..b_hi) */
static void count_instance(Scratch *scratch, const int32_t *a_ids, long a_lo, long a_hi,
                           const int32_t *b_ids, long b_lo, long b_hi, long unk_id, long n,
                           int random_next) {
  long unk = 0;
  for (long i = a_lo; i < a_hi; i++) unk += a_ids[i] == unk_id;
  for (long i = b_lo; i < b_hi; i++) unk += b_ids[i] == unk_id;
  scratch->instances++;
  scratch->tokens += n;
  scratch->unk_tokens += unk;
  scratch->next_sentence_random += random_next;
  scratch->histogram[n]++;
}

#endif
