/* MinHash signatures in C: bert_fin/text/dedup/near_dup.py is the only caller.
 *
 * Contract: text_signatures(points, lengths, a, b, out) computes exactly what near_dup's numpy
 * reference computes (near_dup.numpy_signatures of near_dup.shingle_batch) for the same texts:
 *   points    uint32 [chars]            the code points of the texts joined by one separator
 *                                       ("\n".join(texts) as UTF-32)
 *   lengths   int64 [texts]             each text's code points (separators not counted)
 *   a, b      uint64 [num_perm]         the hash family (near_dup.hash_family)
 *   out       uint32 [texts, num_perm]  written for each text with at least one token:
 *             out[t][k] = min over its shingles x of ((a[k] * x + b[k]) mod 2^64) >> 32;
 *             rows of texts without a token are left as they are (the caller fills EMPTY).
 *   word_powers uint64 [MAX_WORD]       near_dup._WORD_POWERS, the word hash's weights
 * Tokens and shingles as near_dup.py's module docstring defines them (and its _tokens and
 * _combine compute them with numpy): a non-space code point is a token, a run of ASCII letters
 * one token (case folded, the sum of its letters times word_powers[min(position, MAX_WORD -
 * 1)]), each token mixed by splitmix64's finaliser; a shingle is 5 consecutive tokens
 * combined with _SHINGLE_BASE and mixed, or for a text of 1-4 tokens all of them, xor their
 * count. Unsigned 64-bit arithmetic wraps mod 2^64 in C as in numpy, and the top 32 bits of a
 * minimum are the minimum of the top 32 bits, so the values are the same bit for bit (tested on
 * random texts against the numpy path, tests/test_near_dup.py). The GIL is released meanwhile.
 * Why C: numpy makes ~30 passes over token arrays and three over a [num_perm, shingles] array
 * (multiply, add, reduce); here a text is tokenised in one pass and each hash function runs
 * over a block of shingles in L1 with its minimums in registers.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>

/* near_dup.py's constants (the same names there) */
#define SHINGLE_SIZE 5
#define MAX_WORD 4096
#define SHINGLE_BASE 0x9E3779B97F4A7C15ULL

static uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ULL;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBULL;
  x ^= x >> 31;
  return x;
}

static int is_space(uint32_t p) { return p <= 32 || p == 0x3000 || p == 0xA0 || p == 0x85; }

static int is_latin(uint32_t p) {
  uint32_t folded = p | 32;
  return folded >= 97 && folded <= 122;
}

/* The mixed token hashes of points[0..n) into tokens; returns how many. word_powers: uint64
 * [MAX_WORD], near_dup._WORD_POWERS as they are (given by the caller: the one definition). */
static Py_ssize_t tokenize(const uint32_t *points, Py_ssize_t n, const uint64_t *word_powers,
                           uint64_t *tokens) {
  Py_ssize_t count = 0;
  for (Py_ssize_t i = 0; i < n;) {
    uint32_t p = points[i];
    if (is_space(p)) {
      i++;
      continue;
    }
    if (!is_latin(p)) {
      tokens[count++] = mix64((uint64_t)p);
      i++;
      continue;
    }
    uint64_t word = 0;
    for (Py_ssize_t j = 0; i < n && is_latin(points[i]); i++, j++)
      word += (uint64_t)(points[i] | 32) * word_powers[j < MAX_WORD - 1 ? j : MAX_WORD - 1];
    tokens[count++] = mix64(word);
  }
  return count;
}

/* The shingle hashes of tokens[0..count) into shingles; returns how many. */
static Py_ssize_t shingle(const uint64_t *tokens, Py_ssize_t count, uint64_t *shingles) {
  if (count == 0) return 0;
  Py_ssize_t size = count < SHINGLE_SIZE ? count : SHINGLE_SIZE;
  Py_ssize_t made = count - size + 1;
  for (Py_ssize_t i = 0; i < made; i++) {
    uint64_t combined = tokens[i];
    for (Py_ssize_t offset = 1; offset < size; offset++)
      combined = combined * SHINGLE_BASE + tokens[i + offset];
    if (size != SHINGLE_SIZE) combined ^= (uint64_t)size;
    shingles[i] = mix64(combined);
  }
  return made;
}

static int get_buffer(PyObject *obj, Py_buffer *view, Py_ssize_t itemsize, int writable,
                      const char *name) {
  int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
  if (PyObject_GetBuffer(obj, view, flags) < 0) return -1;
  if (view->itemsize != itemsize) {
    PyErr_Format(PyExc_ValueError, "%s: items of %zd bytes expected, got %zd", name, itemsize,
                 view->itemsize);
    PyBuffer_Release(view);
    return -1;
  }
  return 0;
}

/* Shingles hashed together per function: the minimums stay in registers over a block that
 * stays in L1 (8 KB), each function's a and b are loaded once a block. */
#define BLOCK 1024
#define HASH(a, b, x) ((uint32_t)(((a) * (x) + (b)) >> 32))

/* row[k] = min over shingles x[0..n) of HASH(a[k], b[k], x) (n > 0). */
static void min_hash(const uint64_t *restrict x, Py_ssize_t n, const uint64_t *restrict a,
                     const uint64_t *restrict b, Py_ssize_t num_perm, uint32_t *restrict row) {
  for (Py_ssize_t k = 0; k < num_perm; k++) row[k] = UINT32_MAX;
  for (Py_ssize_t start = 0; start < n; start += BLOCK) {
    const uint64_t *block = x + start;
    Py_ssize_t size = n - start < BLOCK ? n - start : BLOCK;
    for (Py_ssize_t k = 0; k < num_perm; k++) {
      uint64_t ak = a[k], bk = b[k];
      /* four independent minimums: no chain of compares from one shingle to the next */
      uint32_t m0 = row[k], m1 = UINT32_MAX, m2 = UINT32_MAX, m3 = UINT32_MAX;
      Py_ssize_t i = 0;
      for (; i + 4 <= size; i += 4) {
        uint32_t v0 = HASH(ak, bk, block[i]), v1 = HASH(ak, bk, block[i + 1]);
        uint32_t v2 = HASH(ak, bk, block[i + 2]), v3 = HASH(ak, bk, block[i + 3]);
        m0 = v0 < m0 ? v0 : m0;
        m1 = v1 < m1 ? v1 : m1;
        m2 = v2 < m2 ? v2 : m2;
        m3 = v3 < m3 ? v3 : m3;
      }
      for (; i < size; i++) {
        uint32_t v = HASH(ak, bk, block[i]);
        m0 = v < m0 ? v : m0;
      }
      m0 = m1 < m0 ? m1 : m0;
      m2 = m3 < m2 ? m3 : m2;
      row[k] = m2 < m0 ? m2 : m0;
    }
  }
}

/* Every text: tokens, shingles, minimums. scratch: 2 x (longest text) uint64. */
static void hash_texts(const uint32_t *points, const int64_t *lengths, Py_ssize_t texts,
                       const uint64_t *a, const uint64_t *b, Py_ssize_t num_perm,
                       const uint64_t *word_powers, uint32_t *out, uint64_t *tokens,
                       uint64_t *shingles) {
  for (Py_ssize_t t = 0; t < texts; t++) {
    Py_ssize_t count = tokenize(points, (Py_ssize_t)lengths[t], word_powers, tokens);
    Py_ssize_t made = shingle(tokens, count, shingles);
    if (made) min_hash(shingles, made, a, b, num_perm, out + t * num_perm);
    points += lengths[t] + 1;  /* the text and its separator */
  }
}

static PyObject *text_signatures(PyObject *self, PyObject *args) {
  PyObject *objects[6];
  static const char *names[6] = {"points", "lengths", "a", "b", "word_powers", "out"};
  static const Py_ssize_t sizes[6] = {4, 8, 8, 8, 8, 4};
  Py_buffer views[6];
  int got = 0;
  PyObject *result = NULL;
  uint64_t *scratch = NULL;
  (void)self;
  if (!PyArg_ParseTuple(args, "OOOOOO", &objects[0], &objects[1], &objects[2], &objects[3],
                        &objects[4], &objects[5]))
    return NULL;
  for (; got < 6; got++)
    if (get_buffer(objects[got], &views[got], sizes[got], got == 5, names[got]) < 0) goto done;
  {
    Py_ssize_t chars = views[0].len / 4, texts = views[1].len / 8, num_perm = views[2].len / 8;
    const int64_t *lengths = (const int64_t *)views[1].buf;
    int64_t sum = 0, longest = 1;
    for (Py_ssize_t t = 0; t < texts; t++) {
      if (lengths[t] < 0) {
        PyErr_SetString(PyExc_ValueError, "lengths: negative length");
        goto done;
      }
      sum += lengths[t] + 1;
      longest = lengths[t] > longest ? lengths[t] : longest;
    }
    if ((texts && sum - 1 != chars) || views[3].len != views[2].len ||
        views[4].len != 8 * MAX_WORD || views[5].len != 4 * texts * num_perm) {
      PyErr_SetString(PyExc_ValueError,
                      "text_signatures: points are not the texts joined by one separator, "
                      "len(a) != len(b), word_powers not uint64 [MAX_WORD] or out is not "
                      "uint32 [texts, num_perm]");
      goto done;
    }
    scratch = (uint64_t *)malloc(2 * (size_t)longest * sizeof(uint64_t));
    if (!scratch) {
      PyErr_NoMemory();
      goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    hash_texts((const uint32_t *)views[0].buf, lengths, texts, (const uint64_t *)views[2].buf,
               (const uint64_t *)views[3].buf, num_perm, (const uint64_t *)views[4].buf,
               (uint32_t *)views[5].buf, scratch, scratch + longest);
    Py_END_ALLOW_THREADS
  }
  Py_INCREF(Py_None);
  result = Py_None;
done:
  free(scratch);
  for (int i = 0; i < got; i++) PyBuffer_Release(&views[i]);
  return result;
}

static PyMethodDef methods[] = {
    {"text_signatures", text_signatures, METH_VARARGS,
     "text_signatures(points, lengths, a, b, word_powers, out): MinHash signatures of texts."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_minhash",
                                    "MinHash signatures (near_dup.py's C path).", -1, methods};

PyMODINIT_FUNC PyInit__minhash(void) { return PyModule_Create(&module); }
