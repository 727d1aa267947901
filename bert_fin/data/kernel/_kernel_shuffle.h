/* The parent process's bounded shuffle and round-robin dealing of packed records, for _kernel.c.
 *
 * Records travel packed: a bytes blob (records concatenated) plus their byte lengths (uint32 array
 * bytes). The window keeps a malloc'd copy of each record it holds, so no Python object is made per
 * record. Semantics are exactly
 * pipeline.WindowShuffler.push_many's (the same random.Random draws, the same slots) and
 * writer.ShardedRecordWriter.write_many's (record k of a batch to file (first + k) % num_files).
 * Included once, by _kernel.c. */
#ifndef BERT_FIN_KERNEL_SHUFFLE_H
#define BERT_FIN_KERNEL_SHUFFLE_H

typedef struct {
  char *data; /* malloc'd copy of the record */
  Py_ssize_t length;
} Entry;

typedef struct {
  Py_ssize_t window, filled;
  Entry *entries; /* [window] */
} Window;

static void window_release(Window *w) {
  for (Py_ssize_t i = 0; i < w->filled; i++) free(w->entries[i].data);
  w->filled = 0;
}

static void window_capsule_destructor(PyObject *capsule) {
  Window *w = PyCapsule_GetPointer(capsule, "bert_fin.kernel_window");
  if (w == NULL) return;
  window_release(w);
  free(w->entries);
  free(w);
}

/* make_window(window) -> capsule */
static PyObject *make_window(PyObject *self, PyObject *args) {
  Py_ssize_t size;
  if (!PyArg_ParseTuple(args, "n", &size)) return NULL;
  if (size < 1) {
    PyErr_SetString(PyExc_ValueError, "the shuffle window must be >= 1");
    return NULL;
  }
  Window *w = calloc(1, sizeof(Window));
  if (w == NULL || (w->entries = malloc(sizeof(Entry) * size)) == NULL) {
    free(w);
    return PyErr_NoMemory();
  }
  w->window = size;
  PyObject *capsule = PyCapsule_New(w, "bert_fin.kernel_window", window_capsule_destructor);
  if (capsule == NULL) {
    free(w->entries);
    free(w);
  }
  return capsule;
}

/* window_push(window, mt_state, blob, lengths) -> (emitted_blob, emitted_lengths, new_state):
 * pushes each record of blob in order; returns the records it displaced, packed the same way. The
 * window holds copies, so memory is the records held, whatever their blobs. */
static PyObject *window_push(PyObject *self, PyObject *args) {
  PyObject *capsule, *state;
  Py_buffer blob, lengths;
  if (!PyArg_ParseTuple(args, "OO!y*y*", &capsule, &PyTuple_Type, &state, &blob, &lengths))
    return NULL;
  PyObject *result = NULL, *out_blob = NULL, *out_lengths = NULL, *new_state = NULL;
  Entry *emitted = NULL;
  Py_ssize_t num_emitted = 0;
  Window *w = PyCapsule_GetPointer(capsule, "bert_fin.kernel_window");
  Mt mt;
  if (w == NULL || state_from_tuple(state, &mt) < 0) goto done;
  const uint32_t *sizes = lengths.buf;
  Py_ssize_t n = lengths.len / (Py_ssize_t)sizeof(uint32_t), total = 0;
  for (Py_ssize_t i = 0; i < n; i++) total += sizes[i];
  if (lengths.len % (Py_ssize_t)sizeof(uint32_t) || total != blob.len) {
    PyErr_SetString(PyExc_ValueError, "record lengths do not add up to the blob");
    goto done;
  }
  emitted = malloc(sizeof(Entry) * (n ? n : 1));
  if (emitted == NULL) {
    PyErr_NoMemory();
    goto done;
  }
  Py_ssize_t emitted_bytes = 0;
  const char *source = blob.buf;
  for (Py_ssize_t i = 0; i < n; i++) {
    Entry entry = {malloc(sizes[i] ? sizes[i] : 1), sizes[i]};
    if (entry.data == NULL) {
      PyErr_NoMemory();
      goto done;
    }
    memcpy(entry.data, source, sizes[i]);
    source += sizes[i];
    if (w->filled < w->window) {
      w->entries[w->filled++] = entry;
      continue;
    }
    Py_ssize_t slot = (Py_ssize_t)(mt_random(&mt) * (double)w->window);
    emitted[num_emitted++] = w->entries[slot];
    emitted_bytes += w->entries[slot].length;
    w->entries[slot] = entry;
  }
  out_blob = PyBytes_FromStringAndSize(NULL, emitted_bytes);
  out_lengths = PyBytes_FromStringAndSize(NULL, num_emitted * (Py_ssize_t)sizeof(uint32_t));
  if (out_blob == NULL || out_lengths == NULL) goto done;
  char *cursor = PyBytes_AS_STRING(out_blob);
  uint32_t *out_sizes = (uint32_t *)PyBytes_AS_STRING(out_lengths);
  for (Py_ssize_t i = 0; i < num_emitted; i++) {
    memcpy(cursor, emitted[i].data, emitted[i].length);
    cursor += emitted[i].length;
    out_sizes[i] = (uint32_t)emitted[i].length;
  }
  if ((new_state = state_to_tuple(&mt)) == NULL) goto done;
  result = Py_BuildValue("(OON)", out_blob, out_lengths, new_state);
done:
  for (Py_ssize_t i = 0; i < num_emitted; i++) free(emitted[i].data);
  free(emitted);
  Py_XDECREF(out_blob);
  Py_XDECREF(out_lengths);
  PyBuffer_Release(&blob);
  PyBuffer_Release(&lengths);
  return result;
}

/* window_drain(window) -> list of the records in the window, in slot order; empties it */
static PyObject *window_drain(PyObject *self, PyObject *args) {
  PyObject *capsule;
  if (!PyArg_ParseTuple(args, "O", &capsule)) return NULL;
  Window *w = PyCapsule_GetPointer(capsule, "bert_fin.kernel_window");
  if (w == NULL) return NULL;
  PyObject *records = PyList_New(w->filled);
  if (records == NULL) return NULL;
  for (Py_ssize_t i = 0; i < w->filled; i++) {
    Entry *e = &w->entries[i];
    PyObject *record = PyBytes_FromStringAndSize(e->data, e->length);
    if (record == NULL) {
      Py_DECREF(records);
      return NULL;
    }
    PyList_SET_ITEM(records, i, record);
  }
  window_release(w);
  return records;
}

/* deal_records(blob, lengths, num_files, first) -> list of num_files bytes: record k of the blob
 * appended to file (first + k) % num_files, in order. */
static PyObject *deal_records(PyObject *self, PyObject *args) {
  Py_buffer blob, lengths;
  Py_ssize_t num_files, first;
  if (!PyArg_ParseTuple(args, "y*y*nn", &blob, &lengths, &num_files, &first)) return NULL;
  PyObject *files = NULL;
  Py_ssize_t *file_bytes = NULL;
  char **cursors = NULL;
  const uint32_t *sizes = lengths.buf;
  Py_ssize_t n = lengths.len / (Py_ssize_t)sizeof(uint32_t), total = 0;
  for (Py_ssize_t i = 0; i < n; i++) total += sizes[i];
  if (num_files < 1 || first < 0 || first >= num_files
      || lengths.len % (Py_ssize_t)sizeof(uint32_t) || total != blob.len) {
    PyErr_SetString(PyExc_ValueError, "bad deal_records arguments");
    goto done;
  }
  file_bytes = calloc(num_files, sizeof(Py_ssize_t));
  cursors = calloc(num_files, sizeof(char *));
  if (file_bytes == NULL || cursors == NULL) {
    PyErr_NoMemory();
    goto done;
  }
  for (Py_ssize_t i = 0; i < n; i++) file_bytes[(first + i) % num_files] += sizes[i];
  if ((files = PyList_New(num_files)) == NULL) goto done;
  for (Py_ssize_t f = 0; f < num_files; f++) {
    PyObject *data = PyBytes_FromStringAndSize(NULL, file_bytes[f]);
    if (data == NULL) {
      Py_CLEAR(files);
      goto done;
    }
    PyList_SET_ITEM(files, f, data);
    cursors[f] = PyBytes_AS_STRING(data);
  }
  const char *source = blob.buf;
  for (Py_ssize_t i = 0; i < n; i++) {
    Py_ssize_t f = (first + i) % num_files;
    memcpy(cursors[f], source, sizes[i]);
    cursors[f] += sizes[i];
    source += sizes[i];
  }
done:
  free(file_bytes);
  free(cursors);
  PyBuffer_Release(&blob);
  PyBuffer_Release(&lengths);
  return files;
}

#endif
