"""HTML page -> plain text paragraphs with BeautifulSoup (stdlib `html.parser`, no lxml needed).

Contract of `html_to_text(markup)`:
  * script/style/noscript/iframe/... are removed together with their contents (no CSS/JS leaks);
  * block elements (p, div, li, h1-h6, tr, br, ...) become line breaks, so paragraphs stay apart;
  * entities are decoded by the parser;
  * with `drop_boilerplate`, nav/header/footer/aside/form/menu elements and link lists (containers
    with >= 3 links and >= 80% link text, e.g. menu tables) are removed; with
    `drop_tables`, tables are removed (else every table row becomes one line, cells space-separated).
The result still needs `normalize.normalize_text`; it may contain runs of blank lines.
"""
import warnings

import bs4

# Removed with their contents, always: they never hold readable text.
NON_TEXT_TAGS = ("script", "style", "noscript", "iframe", "template", "svg", "canvas", "object",
                 "embed", "head", "title", "meta", "link", "button", "select", "textarea", "audio",
                 "video", "map")
# Page furniture, removed when drop_boilerplate is set.
BOILERPLATE_TAGS = ("nav", "header", "footer", "aside", "form", "menu")
# Elements that start a new paragraph.
BLOCK_TAGS = ("p", "div", "br", "hr", "li", "ul", "ol", "dl", "dt", "dd", "h1", "h2", "h3", "h4",
              "h5", "h6", "tr", "table", "thead", "tbody", "tfoot", "caption", "blockquote",
              "pre", "section", "article", "main", "address", "figure", "figcaption", "center",
              "body", "html", "nav", "header", "footer", "aside", "form", "fieldset", "legend",
              "details", "summary")
CELL_TAGS = ("td", "th")
# Containers that are navigation when nearly all their text is link text.
LINK_LIST_TAGS = ("table", "ul", "ol", "div", "p", "span", "td")
MIN_NAV_LINKS = 3
MIN_LINK_TEXT_RATIO = 0.8


def _remove_tags(soup, names):
  for element in soup.find_all(names):
    element.decompose()


def _remove_comments(soup):
  for comment in soup.find_all(string=lambda s: isinstance(s, (bs4.Comment, bs4.Doctype,
                                                                 bs4.CData,
                                                                 bs4.ProcessingInstruction,
                                                                 bs4.Declaration))):
    comment.extract()


def _remove_link_lists(soup):
  """Removes containers with >= MIN_NAV_LINKS links whose text is mostly link text (menus)."""
  for element in soup.find_all(LINK_LIST_TAGS):
    if element.decomposed:
      continue
    links = element.find_all("a")
    if len(links) < MIN_NAV_LINKS:
      continue
    text = "".join(element.get_text().split())
    link_text = sum(len("".join(link.get_text().split())) for link in links)
    if text and link_text >= MIN_LINK_TEXT_RATIO * len(text):
      element.decompose()


def _mark_blocks(soup):
  """Puts a '\\n' before and after every block element, a space after every table cell."""
  for element in soup.find_all(BLOCK_TAGS):
    element.insert_before("\n")
    element.insert_after("\n")
  for element in soup.find_all(CELL_TAGS):
    element.insert_after(" ")


def parse_html(markup):
  """markup: str -> BeautifulSoup tree (html.parser); parser warnings are silenced."""
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    return bs4.BeautifulSoup(markup, "html.parser")


def html_to_text(markup, drop_boilerplate=True, drop_tables=False):
  """markup: str (decoded HTML) -> str text, one paragraph per line (not yet normalised)."""
  soup = parse_html(markup)
  _remove_comments(soup)
  _remove_tags(soup, NON_TEXT_TAGS)
  if drop_boilerplate:
    _remove_tags(soup, BOILERPLATE_TAGS)
    _remove_link_lists(soup)
  if drop_tables:
    _remove_tags(soup, ["table"])
  _mark_blocks(soup)
  return soup.get_text("")


def looks_like_html(text, probe_chars=2048):
  """True when the start of `text` looks like an HTML document or fragment."""
  head = text[:probe_chars].lstrip().lower()
  return head.startswith(("<!doctype html", "<html", "<?xml")) or (
      "<body" in head or "<div" in head or "<p>" in head or "<head" in head)
