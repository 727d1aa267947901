"""Character-level normalisation rules, each a named pure function `str -> str`.

`normalize_text` applies them in a fixed order:
  unescape_html_entities -> remove_private_use -> remove_invalid_code_points -> remove_control_chars -> remove_zero_width
  -> fullwidth_to_halfwidth -> collapse_whitespace.
Line breaks are kept (they mark paragraphs); everything else is collapsed within a line.
"""
import functools
import html
import re
import unicodedata

# Format characters with no visible width: ZWSP, ZWNJ, ZWJ, LRM/RLM, word joiner, BOM, soft hyphen,
# Mongolian vowel separator, bidi embeddings/isolates and invisible operators.
# Complete entities only (with ';'): html.unescape alone would also turn "&notice" into "¬ice".
_ENTITY_RE = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});")
_ZERO_WIDTH = ("\u00ad\u180e\u200b\u200c\u200d\u200e\u200f\u202a-\u202e\u2060-\u2064"
               "\u2066-\u206f\ufeff")
_ZERO_WIDTH_RE = re.compile("[%s]" % _ZERO_WIDTH)
_PRIVATE_USE_RE = re.compile("[\ue000-\uf8ff\U000f0000-\U000ffffd\U00100000-\U0010fffd]")
# C0/C1 controls except TAB and LF (TAB becomes a space, CR is folded into LF first).
_CONTROL_RE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_HORIZONTAL_SPACE_RE = re.compile(r"[^\S\n]+")  # any whitespace but newline
_BLANK_LINES_RE = re.compile(r"\n\s*\n\s*")
_FULLWIDTH_TABLE = {0x3000: 0x20}
for _offset in range(10):
  _FULLWIDTH_TABLE[0xFF10 + _offset] = 0x30 + _offset  # ０-９
for _offset in range(26):
  _FULLWIDTH_TABLE[0xFF21 + _offset] = 0x41 + _offset  # Ａ-Ｚ
  _FULLWIDTH_TABLE[0xFF41 + _offset] = 0x61 + _offset  # ａ-ｚ
# Full-width symbols of numbers and code (８．５％, －３, ＡＢ＋) -> ASCII. Chinese punctuation
# (，。！？：；、（）“”《》) is deliberately not listed.
FULLWIDTH_SYMBOLS = "％＋－＝＠＃＄＆＊／＜＞＾＿｜～．"
for _char in FULLWIDTH_SYMBOLS:
  _FULLWIDTH_TABLE[ord(_char)] = ord(_char) - 0xFEE0


def _ranges_to_class(code_points):
  """Sorted code points -> a regex character class body of ranges."""
  parts, start, prev = [], None, None
  for cp in code_points:
    if start is None:
      start = prev = cp
    elif cp == prev + 1:
      prev = cp
    else:
      parts.append((start, prev))
      start = prev = cp
  if start is not None:
    parts.append((start, prev))
  return "".join(re.escape(chr(a)) if a == b else "%s-%s" % (re.escape(chr(a)), re.escape(chr(b)))
                 for a, b in parts)


_ASTRAL_RE = re.compile("[\U00010000-\U0010ffff]")


@functools.lru_cache(maxsize=1)
def _invalid_bmp_re():
  """Unassigned (Cn, incl. non-characters) and surrogate (Cs) code points of the BMP.

  BMP-only so that `re` compiles it to a constant-time bitmap; astral characters (rare) are
  checked one by one in `remove_invalid_code_points`.
  """
  invalid = [cp for cp in range(0x10000) if unicodedata.category(chr(cp)) in ("Cn", "Cs")]
  return re.compile("[%s]" % _ranges_to_class(invalid))


def _drop_if_invalid(match):
  return "" if unicodedata.category(match.group(0)) in ("Cn", "Cs") else match.group(0)


def warm_up():
  """Builds the lazily compiled tables now (call before forking workers)."""
  _invalid_bmp_re()


def unescape_html_entities(text):
  """Decodes leftover entities (&nbsp; &amp; &#12290; &ldquo;) of crawled text or of double-escaped
  HTML; unknown names are left as they are."""
  if "&" not in text:
    return text
  return _ENTITY_RE.sub(lambda match: html.unescape(match.group(0)), text)


def remove_private_use(text):
  """Drops private-use code points (U+E000-U+F8FF and planes 15-16): crawl icon fonts, mojibake."""
  return _PRIVATE_USE_RE.sub("", text)


def remove_invalid_code_points(text):
  """Drops unassigned code points, non-characters (U+FFFE...) and lone surrogates."""
  text = _invalid_bmp_re().sub("", text)
  if _ASTRAL_RE.search(text):
    text = _ASTRAL_RE.sub(_drop_if_invalid, text)
  return text


def remove_control_chars(text):
  """CRLF/CR -> LF, TAB -> space, other C0/C1 control characters dropped."""
  text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\t", " ")
  return _CONTROL_RE.sub("", text)


def remove_zero_width(text):
  """Drops zero-width and invisible format characters (U+200B, U+FEFF, soft hyphen, bidi marks)."""
  return _ZERO_WIDTH_RE.sub("", text)


def fullwidth_to_halfwidth(text):
  """Full-width digits, Latin letters, FULLWIDTH_SYMBOLS and the ideographic space U+3000 -> ASCII.

  Chinese full-width punctuation (，。！？：；、（）“” ...) is kept as is.
  """
  return text.translate(_FULLWIDTH_TABLE)


def collapse_whitespace(text):
  """Runs of spaces within a line -> one space, lines stripped, runs of blank lines -> one line break.

  Paragraph structure survives as single '\\n' separators; the result has no leading/trailing space.
  """
  text = _HORIZONTAL_SPACE_RE.sub(" ", text)
  text = _BLANK_LINES_RE.sub("\n", text)
  return "\n".join(line.strip() for line in text.split("\n") if line.strip())


NORMALIZATION_RULES = (
    unescape_html_entities,
    remove_private_use,
    remove_invalid_code_points,
    remove_control_chars,
    remove_zero_width,
    fullwidth_to_halfwidth,
    collapse_whitespace,
)


def normalize_text(text):
  """Applies every rule of NORMALIZATION_RULES in order; returns paragraphs joined by '\\n'."""
  for rule in NORMALIZATION_RULES:
    text = rule(text)
  return text
