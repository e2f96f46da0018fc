"""What the SQuAD data tests share besides their fixtures (conftest:
`sp_tokenizer`, `squad_dev`): small files written on the fly and a sample of
real paragraphs."""

import json


def write_json(path, data):
  with open(path, "w", encoding="utf-8") as f:
    json.dump(data, f)
  return str(path)


def squad_json(paragraphs, version="v2.0"):
  return {"version": version, "data": [{"title": "t",
                                        "paragraphs": paragraphs}]}


def sample_paragraphs(dev, n_plain=16):
  """Paragraph index -> its examples: non-ASCII ones, the longest, and the
  first few."""
  by_paragraph = {}
  for e in dev.examples:
    by_paragraph.setdefault(e.paragraph_index, []).append(e)
  texts = {k: v[0].paragraph_text for k, v in by_paragraph.items()}
  unicode_ = [k for k, t in texts.items() if any(ord(c) > 127 for c in t)]
  longest = sorted(texts, key=lambda k: -len(texts[k]))
  picks = unicode_[:20] + longest[:4] + list(by_paragraph)[:n_plain]
  return {k: by_paragraph[k] for k in dict.fromkeys(picks)}
