/* Dynamic-masking records in C (UnmaskedExampleEncoder's layout, dispatch.py): the
 * instance unmasked, with its word_starts; no random draws. Included once, by _kernel.c, after
 * _kernel_record.h. */
#ifndef BERT_FIN_KERNEL_UNMASKED_H
#define BERT_FIN_KERNEL_UNMASKED_H

/* An unmasked record of [CLS] A [SEP] B [SEP] (pair) or [CLS] A [SEP] with its word_starts
 * (masking.word_starts: 2 at [CLS]/[SEP], 1 where a word begins -- a segment's first token always
 * does -- else 0), in UnmaskedExampleEncoder's order; no random draws. Returns the framed record
 * (new reference) or NULL. */
static PyObject *make_unmasked_record(const Block *block, Scratch *scratch, Py_ssize_t a_base,
                                      long a_lo, long a_hi, Py_ssize_t b_base, long b_lo,
                                      long b_hi, int pair, int random_next) {
  const long s = block->max_seq_length;
  const long na = a_hi - a_lo, nb = pair ? b_hi - b_lo : 0, n = pair ? na + nb + 3 : na + 2;
  const int32_t *a_ids = block->ids + a_base, *b_ids = block->ids + b_base;
  const uint8_t *a_starts = block->starts + a_base, *b_starts = block->starts + b_base;
  uint8_t *ids_out = scratch->ids_payload, *starts = scratch->word_starts;
  size_t ids_size = 0;
  long t = 0;
  ids_size += put_varint(ids_out + ids_size, (uint64_t)block->cls_id);
  starts[t++] = 2;
  for (long i = a_lo; i < a_hi; i++) {
    ids_size += put_varint(ids_out + ids_size, (uint64_t)a_ids[i]);
    starts[t++] = (i == a_lo || a_starts[i]) ? 1 : 0;
  }
  ids_size += put_varint(ids_out + ids_size, (uint64_t)block->sep_id);
  starts[t++] = 2;
  if (pair) {
    for (long i = b_lo; i < b_hi; i++) {
      ids_size += put_varint(ids_out + ids_size, (uint64_t)b_ids[i]);
      starts[t++] = (i == b_lo || b_starts[i]) ? 1 : 0;
    }
    ids_size += put_varint(ids_out + ids_size, (uint64_t)block->sep_id);
    starts[t++] = 2;
  }

  const long pad_s = s - n;
  uint8_t *body = scratch->record, *out = body;
  Py_ssize_t w;
#define PUT_TABLE(which, index) \
  if ((w = put_table_item(block, which, index, out)) < 0) return NULL; \
  out += w;
#define PUT_BYTES(which) \
  memcpy(out, PyBytes_AS_STRING(block->tables[which]), PyBytes_GET_SIZE(block->tables[which])); \
  out += PyBytes_GET_SIZE(block->tables[which]);
  PUT_TABLE(T_IDS_HEADERS, (Py_ssize_t)(ids_size + pad_s));
  memcpy(out, ids_out, ids_size);
  out += ids_size;
  memset(out, 0, pad_s);
  out += pad_s;
  PUT_TABLE(T_LEN_ENTRIES, n);
  PUT_BYTES(T_SEGMENT_PREFIX);
  out = put_segment_ids(out, na, nb, pair, pad_s);
  PUT_BYTES(T_WORD_STARTS_PREFIX);
  memcpy(out, starts, n);
  out += n;
  memset(out, 0, pad_s);
  out += pad_s;
  PUT_TABLE(T_LABEL_ENTRIES, random_next);
#undef PUT_BYTES
#undef PUT_TABLE
  PyObject *framed = frame_example(body, out - body);
  if (framed == NULL) return NULL;
  count_instance(scratch, a_ids, a_lo, a_hi, b_ids, b_lo, pair ? b_hi : b_lo, block->unk_id, n,
                 random_next);
  return framed;
}

#endif
