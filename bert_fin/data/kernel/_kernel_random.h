/* CPython's random.Random in C for _kernel.c: MT19937 with random() = (a >> 5, b >> 6) / 2**53
 * and getrandbits(k) in 32-bit words, least significant word first, on the 625-int internal state of
 * random.Random.getstate() (624 words + index). Included once, by _kernel.c. */
#ifndef BERT_FIN_KERNEL_RANDOM_H
#define BERT_FIN_KERNEL_RANDOM_H
#define MT_N 624
#define MT_M 397

typedef struct {
  uint32_t state[MT_N];
  int index;
} Mt;

static uint32_t mt_next(Mt *mt) {
  static const uint32_t mag01[2] = {0x0U, 0x9908b0dfU};
  uint32_t y;
  if (mt->index >= MT_N) {
    int kk;
    for (kk = 0; kk < MT_N - MT_M; kk++) {
      y = (mt->state[kk] & 0x80000000U) | (mt->state[kk + 1] & 0x7fffffffU);
      mt->state[kk] = mt->state[kk + MT_M] ^ (y >> 1) ^ mag01[y & 0x1U];
    }
    for (; kk < MT_N - 1; kk++) {
      y = (mt->state[kk] & 0x80000000U) | (mt->state[kk + 1] & 0x7fffffffU);
      mt->state[kk] = mt->state[kk + (MT_M - MT_N)] ^ (y >> 1) ^ mag01[y & 0x1U];
    }
    y = (mt->state[MT_N - 1] & 0x80000000U) | (mt->state[0] & 0x7fffffffU);
    mt->state[MT_N - 1] = mt->state[MT_M - 1] ^ (y >> 1) ^ mag01[y & 0x1U];
    mt->index = 0;
  }
  y = mt->state[mt->index++];
  y ^= (y >> 11);
  y ^= (y << 7) & 0x9d2c5680U;
  y ^= (y << 15) & 0xefc60000U;
  y ^= (y >> 18);
  return y;
}

/* random.random() */
static double mt_random(Mt *mt) {
  uint32_t a = mt_next(mt) >> 5, b = mt_next(mt) >> 6;
  return (a * 67108864.0 + b) * (1.0 / 9007199254740992.0);
}

/* bin(random.getrandbits(k)).count("1"), k >= 1 */
static int mt_random_bits_popcount(Mt *mt, long k) {
  int count = 0;
  if (k <= 32) return __builtin_popcount(mt_next(mt) >> (32 - k));
  for (; k > 0; k -= 32) {
    uint32_t r = mt_next(mt);
    if (k < 32) r >>= (32 - k);
    count += __builtin_popcount(r);
  }
  return count;
}

/* instances.uniform_int: low + int(random() * (high - low + 1)) */
static long uniform_int(Mt *mt, long low, long high) {
  return low + (long)(mt_random(mt) * (double)(high - low + 1));
}

static int state_from_tuple(PyObject *tuple, Mt *mt) {
  if (!PyTuple_Check(tuple) || PyTuple_GET_SIZE(tuple) != MT_N + 1) {
    PyErr_SetString(PyExc_ValueError, "expected random.Random's 625-int internal state");
    return -1;
  }
  for (int i = 0; i < MT_N; i++) {
    unsigned long v = PyLong_AsUnsignedLong(PyTuple_GET_ITEM(tuple, i));
    if (v == (unsigned long)-1 && PyErr_Occurred()) return -1;
    mt->state[i] = (uint32_t)v;
  }
  long index = PyLong_AsLong(PyTuple_GET_ITEM(tuple, MT_N));
  if (index == -1 && PyErr_Occurred()) return -1;
  if (index < 0 || index > MT_N) {
    PyErr_SetString(PyExc_ValueError, "bad random.Random state index");
    return -1;
  }
  mt->index = (int)index;
  return 0;
}

static PyObject *state_to_tuple(const Mt *mt) {
  PyObject *tuple = PyTuple_New(MT_N + 1);
  if (tuple == NULL) return NULL;
  for (int i = 0; i < MT_N; i++) {
    PyObject *v = PyLong_FromUnsignedLong(mt->state[i]);
    if (v == NULL) { Py_DECREF(tuple); return NULL; }
    PyTuple_SET_ITEM(tuple, i, v);
  }
  PyObject *index = PyLong_FromLong(mt->index);
  if (index == NULL) { Py_DECREF(tuple); return NULL; }
  PyTuple_SET_ITEM(tuple, MT_N, index);
  return tuple;
}

#endif
