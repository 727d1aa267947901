/* The block of documents and the configuration _kernel.c works on: make_block() copies the
 * Python documents (sentences of ids and starts) into flat C arrays once per block, and keeps
 * references to ExampleEncoder's precomputed tables. Included once, by _kernel.c. */
#ifndef BERT_FIN_KERNEL_BLOCK_H
#define BERT_FIN_KERNEL_BLOCK_H
/* Tables of ExampleEncoder / UnmaskedExampleEncoder (see dispatch.py), by index: static
 * records use every slot but the last (T_MASK_ENTRIES only with input_mask); dynamic-masking records
 * use ids headers, len entries, segment prefix, label entries and the word_starts prefix. */
enum {
  T_IDS_HEADERS, T_POSITIONS_HEADERS, T_LABELS_HEADERS, T_LEN_ENTRIES, T_MASK_ENTRIES,
  T_SEGMENT_PREFIX, T_WEIGHT_ENTRIES, T_LABEL_ENTRIES, T_WORD_STARTS_PREFIX, NUM_TABLES
};

typedef struct {
  /* documents: document d has tokens ids[token_base[d] .. token_base[d + 1]) and sentence
   * boundaries offsets[offset_base[d] .. offset_base[d] + num_sentences[d]] (relative to its
   * first token) */
  Py_ssize_t num_documents;
  int32_t *ids;
  uint8_t *starts;
  Py_ssize_t *token_base;
  int32_t *offsets;
  Py_ssize_t *offset_base;
  int32_t *num_sentences;
  /* config */
  int full_sentences; /* 0: google's NSP pairs (objective bert), 1: full sentences (roberta) */
  int dynamic;        /* 1: unmasked records with word_starts (no masking draws) */
  long max_seq_length, max_predictions;
  double short_seq_prob;
  /* google's rules (pretraining_rules.py, given by kernel_dispatch): a pairing draw below
   * random_next_below makes B a random next; a chosen token's draw below mask_below becomes [MASK],
   * from random_from a random id random_ids[(draw - random_from) * random_scale * R], else kept */
  double random_next_below, mask_below, random_from, random_scale;
  long cls_id, sep_id, mask_id, unk_id;
  int32_t *random_ids;
  Py_ssize_t num_random_ids;
  int32_t *budgets; /* [max_seq_length + 1] */
  PyObject *tables[NUM_TABLES]; /* owned references */
} Block;

static void block_free(Block *block) {
  if (block == NULL) return;
  free(block->ids);
  free(block->starts);
  free(block->token_base);
  free(block->offsets);
  free(block->offset_base);
  free(block->num_sentences);
  free(block->random_ids);
  free(block->budgets);
  for (int i = 0; i < NUM_TABLES; i++) Py_XDECREF(block->tables[i]);
  free(block);
}

static void block_capsule_destructor(PyObject *capsule) {
  block_free((Block *)PyCapsule_GetPointer(capsule, "bert_fin.kernel_block"));
}

static int32_t *int_list(PyObject *list, Py_ssize_t *size, const char *what) {
  if (!PyList_Check(list)) {
    PyErr_Format(PyExc_TypeError, "%s must be a list of ints", what);
    return NULL;
  }
  Py_ssize_t n = PyList_GET_SIZE(list);
  int32_t *out = malloc(sizeof(int32_t) * (n ? n : 1));
  if (out == NULL) { PyErr_NoMemory(); return NULL; }
  for (Py_ssize_t i = 0; i < n; i++) {
    long v = PyLong_AsLong(PyList_GET_ITEM(list, i));
    if (v == -1 && PyErr_Occurred()) { free(out); return NULL; }
    if (v < 0 || v > INT32_MAX) {
      PyErr_Format(PyExc_ValueError, "%s: value %ld out of range", what, v);
      free(out);
      return NULL;
    }
    out[i] = (int32_t)v;
  }
  *size = n;
  return out;
}

/* The PySequence_Fast macros read lists and tuples alike, without a copy. */
static int is_list_or_tuple(PyObject *object) { return PyList_Check(object) || PyTuple_Check(object); }

/* documents: list of list of (ids: list[int], starts: list[bool]) sentences, each non-empty; every
 * document has at least one sentence. */
static int load_documents(Block *block, PyObject *documents) {
  Py_ssize_t num_documents = PyList_GET_SIZE(documents), total_tokens = 0, total_sentences = 0;
  for (Py_ssize_t d = 0; d < num_documents; d++) {
    PyObject *document = PyList_GET_ITEM(documents, d);
    if (!PyList_Check(document) || PyList_GET_SIZE(document) == 0) {
      PyErr_SetString(PyExc_ValueError, "each document must be a non-empty list of sentences");
      return -1;
    }
    for (Py_ssize_t j = 0; j < PyList_GET_SIZE(document); j++) {
      PyObject *sentence = PyList_GET_ITEM(document, j);
      if (!PyTuple_Check(sentence) || PyTuple_GET_SIZE(sentence) != 2
          || !is_list_or_tuple(PyTuple_GET_ITEM(sentence, 0))
          || !is_list_or_tuple(PyTuple_GET_ITEM(sentence, 1))
          || PySequence_Fast_GET_SIZE(PyTuple_GET_ITEM(sentence, 0)) == 0
          || PySequence_Fast_GET_SIZE(PyTuple_GET_ITEM(sentence, 0))
             != PySequence_Fast_GET_SIZE(PyTuple_GET_ITEM(sentence, 1))) {
        PyErr_SetString(PyExc_ValueError, "each sentence must be (ids, starts) lists or tuples of "
                        "equal non-zero length");
        return -1;
      }
      total_tokens += PySequence_Fast_GET_SIZE(PyTuple_GET_ITEM(sentence, 0));
    }
    total_sentences += PyList_GET_SIZE(document) + 1;
  }
  block->num_documents = num_documents;
  block->ids = malloc(sizeof(int32_t) * (total_tokens + 1));
  block->starts = malloc(total_tokens + 1);
  block->token_base = malloc(sizeof(Py_ssize_t) * (num_documents + 1));
  block->offsets = malloc(sizeof(int32_t) * (total_sentences + 1));
  block->offset_base = malloc(sizeof(Py_ssize_t) * (num_documents + 1));
  block->num_sentences = malloc(sizeof(int32_t) * (num_documents + 1));
  if (!block->ids || !block->starts || !block->token_base || !block->offsets
      || !block->offset_base || !block->num_sentences) {
    PyErr_NoMemory();
    return -1;
  }
  Py_ssize_t token = 0, offset = 0;
  for (Py_ssize_t d = 0; d < num_documents; d++) {
    PyObject *document = PyList_GET_ITEM(documents, d);
    Py_ssize_t num_sentences = PyList_GET_SIZE(document), first = token;
    block->token_base[d] = token;
    block->offset_base[d] = offset;
    block->num_sentences[d] = (int32_t)num_sentences;
    block->offsets[offset++] = 0;
    for (Py_ssize_t j = 0; j < num_sentences; j++) {
      PyObject *sentence = PyList_GET_ITEM(document, j);
      PyObject *ids = PyTuple_GET_ITEM(sentence, 0), *starts = PyTuple_GET_ITEM(sentence, 1);
      for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(ids); i++) {
        long v = PyLong_AsLong(PySequence_Fast_GET_ITEM(ids, i));
        if (v == -1 && PyErr_Occurred()) return -1;
        if (v < 0 || v > INT32_MAX) {
          PyErr_Format(PyExc_ValueError, "token id %ld out of range", v);
          return -1;
        }
        int start = PyObject_IsTrue(PySequence_Fast_GET_ITEM(starts, i));
        if (start < 0) return -1;
        block->ids[token] = (int32_t)v;
        block->starts[token] = (uint8_t)start;
        token++;
      }
      block->offsets[offset++] = (int32_t)(token - first);
    }
  }
  block->token_base[num_documents] = token;
  return 0;
}

static int load_tables(Block *block, PyObject *tables) {
  if (!PyTuple_Check(tables) || PyTuple_GET_SIZE(tables) != NUM_TABLES) {
    PyErr_SetString(PyExc_ValueError, "expected the encoder tables of dispatch.py");
    return -1;
  }
  for (int i = 0; i < NUM_TABLES; i++) {
    PyObject *table = PyTuple_GET_ITEM(tables, i);
    int used_static = i != T_WORD_STARTS_PREFIX;
    int used_dynamic = i == T_IDS_HEADERS || i == T_LEN_ENTRIES || i == T_SEGMENT_PREFIX
                       || i == T_LABEL_ENTRIES || i == T_WORD_STARTS_PREFIX;
    int used = block->dynamic ? used_dynamic : used_static;
    int ok = !used || (i == T_MASK_ENTRIES && table == Py_None) ? 1
             : (i == T_SEGMENT_PREFIX || i == T_WORD_STARTS_PREFIX) ? PyBytes_Check(table)
             : PyList_Check(table);
    if (ok && PyList_Check(table)) {
      for (Py_ssize_t j = 0; j < PyList_GET_SIZE(table); j++)
        ok = ok && PyBytes_Check(PyList_GET_ITEM(table, j));
    }
    if (!ok) {
      PyErr_Format(PyExc_TypeError, "encoder table %d has the wrong type", i);
      return -1;
    }
    Py_INCREF(table);
    block->tables[i] = table;
  }
  Py_ssize_t s = block->max_seq_length, p = block->max_predictions;
  if (PyList_GET_SIZE(block->tables[T_LEN_ENTRIES]) <= s
      || PyList_GET_SIZE(block->tables[T_LABEL_ENTRIES]) < 2
      || (!block->dynamic
          && ((block->tables[T_MASK_ENTRIES] != Py_None
               && PyList_GET_SIZE(block->tables[T_MASK_ENTRIES]) <= s)
              || PyList_GET_SIZE(block->tables[T_WEIGHT_ENTRIES]) <= p))) {
    PyErr_SetString(PyExc_ValueError, "encoder tables do not match max_seq_length/predictions");
    return -1;
  }
  return 0;
}

static PyObject *make_block(PyObject *self, PyObject *args) {
  PyObject *documents, *random_ids, *budgets, *tables;
  Block *block = calloc(1, sizeof(Block));
  if (block == NULL) return PyErr_NoMemory();
  if (!PyArg_ParseTuple(args, "O!plldddddllllO!O!O!|p", &PyList_Type, &documents,
                        &block->full_sentences, &block->max_seq_length, &block->max_predictions,
                        &block->short_seq_prob, &block->random_next_below, &block->mask_below,
                        &block->random_from, &block->random_scale,
                        &block->cls_id, &block->sep_id, &block->mask_id, &block->unk_id,
                        &PyList_Type, &random_ids, &PyList_Type, &budgets, &PyTuple_Type, &tables,
                        &block->dynamic)) {
    block_free(block);
    return NULL;
  }
  if (!(0.0 <= block->mask_below && block->mask_below <= block->random_from
        && block->random_from <= 1.0 && block->random_scale > 0.0
        && 0.0 <= block->random_next_below && block->random_next_below <= 1.0)) {
    PyErr_SetString(PyExc_ValueError, "need 0 <= mask_below <= random_from <= 1, random_scale > 0 "
                    "and 0 <= random_next_below <= 1");
    block_free(block);
    return NULL;
  }
  Py_ssize_t num_budgets = 0;
  if (block->max_seq_length < (block->full_sentences ? 4 : 5) || block->max_seq_length > (1 << 20)
      || block->max_predictions < 1
      || load_documents(block, documents) < 0
      || (block->random_ids = int_list(random_ids, &block->num_random_ids, "random_ids")) == NULL
      || (block->budgets = int_list(budgets, &num_budgets, "budgets")) == NULL
      || load_tables(block, tables) < 0) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "bad max_seq_length/predictions");
    block_free(block);
    return NULL;
  }
  if (num_budgets != block->max_seq_length + 1 || block->num_random_ids == 0) {
    PyErr_SetString(PyExc_ValueError, "need max_seq_length + 1 budgets and some random_ids");
    block_free(block);
    return NULL;
  }
  for (Py_ssize_t n = 0; n < num_budgets; n++) {
    if (block->budgets[n] > block->max_predictions) {
      PyErr_SetString(PyExc_ValueError, "a budget exceeds max_predictions_per_seq");
      block_free(block);
      return NULL;
    }
  }
  PyObject *capsule = PyCapsule_New(block, "bert_fin.kernel_block", block_capsule_destructor);
  if (capsule == NULL) block_free(block);
  return capsule;
}

#endif
