/* Masked CRC32C of TFRecord framing, for _kernel.c: SSE4.2 when the CPU has it, else a table.
 * Call crc_init() once (module init). Included once, by _kernel.c. */
#ifndef BERT_FIN_KERNEL_CRC_H
#define BERT_FIN_KERNEL_CRC_H
static uint32_t crc_table[256];

static void crc_table_init(void) {
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ 0x82f63b78U : c >> 1;
    crc_table[i] = c;
  }
}

static uint32_t crc32c_table(const uint8_t *data, size_t size) {
  uint32_t c = 0xffffffffU;
  for (size_t i = 0; i < size; i++) c = crc_table[(c ^ data[i]) & 0xff] ^ (c >> 8);
  return c ^ 0xffffffffU;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
__attribute__((target("sse4.2"))) static uint32_t crc32c_sse42(const uint8_t *data, size_t size) {
  uint64_t c = 0xffffffffU;
  size_t i = 0;
  for (; i + 8 <= size; i += 8) {
    uint64_t word;
    memcpy(&word, data + i, 8);
    c = __builtin_ia32_crc32di(c, word);
  }
  uint32_t c32 = (uint32_t)c;
  for (; i < size; i++) c32 = __builtin_ia32_crc32qi(c32, data[i]);
  return c32 ^ 0xffffffffU;
}
static int have_sse42 = 0;
static uint32_t crc32c(const uint8_t *data, size_t size) {
  return have_sse42 ? crc32c_sse42(data, size) : crc32c_table(data, size);
}
#else
static uint32_t crc32c(const uint8_t *data, size_t size) { return crc32c_table(data, size); }
#endif

static uint32_t mask_crc(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8U; }

static uint32_t masked_crc32c(const uint8_t *data, size_t size) { return mask_crc(crc32c(data, size)); }

static void put_u32le(uint8_t *out, uint32_t v) {
  for (int i = 0; i < 4; i++) out[i] = (uint8_t)(v >> (8 * i));
}

static void crc_init(void) {
  crc_table_init();
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  have_sse42 = __builtin_cpu_supports("sse4.2");
#endif
}

#endif
