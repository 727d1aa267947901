"""The CJK ideographs, stated once: google's BasicTokenizer ranges, read by text/filters.py's CJK
ratio and by tokenization/google.py's one-token-per-ideograph split (tokenization sits above
text/ in the package order, so the ranges live here)."""

# (first, last) code points that google's BasicTokenizer treats as CJK ideographs.
CJK_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)


def is_chinese_char(cp):
  """True if code point `cp` (int) is in one of google's CJK ideograph ranges (CJK_RANGES)."""
  for first, last in CJK_RANGES:
    if first <= cp <= last:
      return True
  return False
