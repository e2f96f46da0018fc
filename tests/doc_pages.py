"""Reading the docs (README.md, CHANGELOG.md, docs/*.md) as a user reads
them, for tests/test_docs.py: fenced blocks and prose, headings and GitHub's
anchors, links, the shell commands of the blocks (continuations joined, the
doc's variables expanded) and what is wrong with them, code spans, dotted
names."""

import functools
import glob
import importlib
import os
import re
import shlex
import unicodedata

from entry_points import ENTRY_POINTS, defined_flags, entry_of, flags_of

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = ["README.md", "CHANGELOG.md"] + sorted(
    os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs",
                                                             "*.md")))
# Read for its links and commands too; its dated figures are history.
BENCHMARKS = "benchmarks/README.md"
PROJECT = ("xlnet_tf", "data_utils")
FENCE = re.compile(r"^( *)```(\S*)\s*$")
SHELL = ("bash", "sh", "shell", "console", "")


def read(doc: str) -> str:
  with open(os.path.join(ROOT, doc), encoding="utf-8") as f:
    return f.read()


def blocks(text: str):
  """(language, first line number, body) of every fenced block; and the
  text with every block blanked out (line numbers kept)."""
  found, prose, current = [], [], None
  for number, line in enumerate(text.split("\n"), 1):
    fence = FENCE.match(line)
    if current is None and fence:
      current = (fence.group(2).lower(), number + 1, len(fence.group(1)), [])
      prose.append("")
    elif current is not None and fence and not fence.group(2):
      found.append((current[0], current[1], "\n".join(current[3])))
      current = None
      prose.append("")
    elif current is not None:
      current[3].append(line[current[2]:])
      prose.append("")
    else:
      prose.append(line)
  assert current is None, f"a block from line {current[1]} is not closed"
  return found, "\n".join(prose)


def without_code_spans(line: str) -> str:
  return re.sub(r"(`+)(.+?)\1", lambda m: " " * len(m.group(0)), line)


def slug(heading: str) -> str:
  """GitHub's anchor of a heading: its text (links' and code's text kept),
  lower case, everything but letters, digits, `_`, `-` and spaces dropped,
  spaces to `-`."""
  text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
  text = text.strip().lower()
  kept = "".join(c for c in text if c in "-_ " or
                 unicodedata.category(c)[0] in "LMN")
  return kept.replace(" ", "-")


def anchors(doc: str) -> set:
  _, prose = blocks(read(doc))
  seen, out = {}, set()
  for line in prose.split("\n"):
    m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
    if not m:
      continue
    base = slug(m.group(1))
    n = seen.get(base, 0)
    seen[base] = n + 1
    out.add(base if n == 0 else f"{base}-{n}")
  return out


def links(doc: str):
  _, prose = blocks(read(doc))
  for number, line in enumerate(prose.split("\n"), 1):
    for m in re.finditer(r"\]\(([^)\s]+)\)", without_code_spans(line)):
      yield number, m.group(1)


def shell_lines(body: str):
  """(offset of its first line, text) of the block's logical lines:
  backslash continuations joined."""
  joined, start, parts = [], 0, []
  for offset, line in enumerate(body.split("\n")):
    if not parts:
      start = offset
    if line.endswith("\\"):
      parts.append(line[:-1])
      continue
    joined.append((start, " ".join(parts + [line])))
    parts = []
  if parts:
    joined.append((start, " ".join(parts)))
  return joined


def split_words(line: str):
  lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|")
  lexer.whitespace_split = True
  lexer.commenters = "#"
  words, command = [], []
  try:
    for token in lexer:
      if set(token) <= set(";&|"):
        words.append(command)
        command = []
      else:
        command.append(token)
  except ValueError:  # an unclosed quote: not shell
    return []
  return words + [command]


ASSIGN = re.compile(r"^\s*([A-Za-z_]\w*)=(\((.*)\)|.*)\s*$")


def commands(doc: str):
  return commands_in(read(doc))


def commands_in(text: str):
  """(line, words) of every command of the text's shell blocks, variables
  set in it (`M="--a --b"`, `F=(--a "--b c")`) expanded where a word is
  one."""
  found, variables = [], {}
  for lang, first, body in blocks(text)[0]:
    if lang not in SHELL:
      continue
    for offset, line in shell_lines(body):
      m = ASSIGN.match(line)
      if m and not line.strip().startswith(("-", ".")) and " " not in \
          line.split("=", 1)[0]:
        value = m.group(3) if m.group(3) is not None else m.group(2)
        try:
          variables[m.group(1)] = shlex.split(value)
          if m.group(3) is None and len(variables[m.group(1)]) == 1:
            variables[m.group(1)] = shlex.split(variables[m.group(1)][0])
        except ValueError:
          pass
        continue
      for words in split_words(line):
        expanded = []
        for word in words:
          name = re.fullmatch(r"\$\{?(\w+)(\[@\])?\}?", word)
          if name and name.group(1) in variables:
            expanded += variables[name.group(1)]
          else:
            expanded.append(word)
        if expanded:
          found.append((first + offset, expanded))
  return found


PYTHON = re.compile(r"(^|/)python(3(\.\d+)?)?$")


def flag_names(arguments):
  for word in arguments:
    if word.startswith("--") and len(word) > 2:
      yield word[2:].split("=", 1)[0]


@functools.lru_cache(maxsize=None)
def make_targets() -> frozenset:
  """The targets the project's Makefile defines."""
  return frozenset(re.findall(r"^([\w.-]+):(?!=)", read("Makefile"), re.M))


def command_problems(doc: str, text: str):
  """What is wrong with the commands of `text` (the doc `doc`): a project
  script or module that is no entry point, a flag its entry does not
  take."""
  bad = []
  for number, words in commands_in(text):
    start = 0
    while start < len(words) and re.match(r"^[A-Za-z_]\w*=", words[start]):
      start += 1
    words = words[start:]
    if not words:
      continue
    if words[0] == "make":
      bad += [f"{doc}:{number}: make {w}: no such target" for w in words[1:]
              if not w.startswith("-") and "=" not in w
              and w not in make_targets()]
      continue
    found = entry_of(words)
    if found is None:
      # A project script or module the entry points do not know.
      if PYTHON.search(words[0]) and len(words) > 1:
        target = words[2] if words[1] == "-m" and len(words) > 2 else words[1]
        if words[1] == "-m" and target.split(".")[0] in PROJECT:
          bad.append(f"{doc}:{number}: python -m {target}: no such entry "
                     "point")
        elif words[1] != "-m" and target.endswith(".py") and not \
            target.startswith("$"):
          bad.append(f"{doc}:{number}: {target}: no such script")
      continue
    entry, arguments = found
    known, choices = flags_of(entry), enum_values(entry)
    for name in flag_names(arguments):
      if name not in known:
        bad.append(f"{doc}:{number}: {entry} has no --{name}")
    for word in arguments:
      name, _, value = word[2:].partition("=")
      if word.startswith("--") and name in choices and "$" not in value \
          and value not in choices[name]:
        bad.append(f"{doc}:{number}: {entry} --{name}={value}: not one of "
                   f"{', '.join(choices[name])}")
  return bad


@functools.lru_cache(maxsize=None)
def enum_values(entry: str) -> dict:
  """{flag name: its values} of `entry`'s enum flags (defined as
  entry_points does it, then deleted again); {} for an entry that is no
  absl entry point or defines its flags elsewhere."""
  if entry not in ENTRY_POINTS:
    return {}
  return {name: tuple(flag.parser.enum_values)
          for name, flag in defined_flags(entry).items()
          if getattr(flag.parser, "enum_values", None)}


def code_spans(doc: str, cells: bool = False):
  """(line, span) of the doc's code spans outside blocks (a span may run
  over a line break, never over a blank line); with `cells`, (line, table
  cell, span), the cell counted by the `|` before it on its line."""
  _, prose = blocks(read(doc))
  for m in re.finditer(r"(`+)((?:(?!\n\s*\n).)+?)\1", prose, re.S):
    number = prose.count("\n", 0, m.start()) + 1
    span = " ".join(m.group(2).split())
    if cells:
      line_start = prose.rfind("\n", 0, m.start()) + 1
      cell = without_code_spans(prose[line_start:m.start()]).count("|")
      yield number, cell, span
    else:
      yield number, span


def resolves(dotted: str) -> bool:
  parts = dotted.split(".")
  for cut in range(len(parts), 0, -1):
    try:
      obj = importlib.import_module(".".join(parts[:cut]))
    except ImportError:
      continue
    try:
      for attr in parts[cut:]:
        obj = getattr(obj, attr)
    except AttributeError:
      return False
    return True
  return False
