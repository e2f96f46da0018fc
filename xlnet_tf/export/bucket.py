"""Publishing an export in a bucket (gs://), where there is no rename.

An object appears whole when its upload completes, but a folder of objects
appears one object at a time. So an export is written in local scratch
first, and then uploaded in an order that never shows a reader half an
export as a whole one:

1. `PARTIAL` is uploaded: the folder is an export of ours in progress;
2. what was there (an export `directory.check_export_dir` accepted, or a
   killed upload's leftovers) goes: its marker first, then its
   `saved_model.pb`, then the rest;
3. every new file but `saved_model.pb` and the marker is uploaded;
4. then `saved_model.pb` (what TF Serving and `tf.saved_model.load` look
   for: the variables it needs are already whole);
5. the marker (what this project's readers take for "complete"); then
   `PARTIAL` goes.

A run killed midway leaves `PARTIAL` beside export files only: the next
export to that place replaces them (`check_export_dir` lets it).
"""

from __future__ import annotations

import os
from typing import Callable, ContextManager

from data_utils import paths

# Marks a folder an export of ours is being uploaded to (empty object).
PARTIAL = "xlnet_tf_export.partial"
# The files a SavedModel loader looks for first, uploaded after the others.
_LOADED_FIRST = ("saved_model.pb", "saved_model.pbtxt")


def _upload_order(marker: str) -> Callable[[str], tuple]:
  def key(relative: str) -> tuple:
    return (relative == marker, relative in _LOADED_FIRST, relative)
  return key


def _remove(url: str) -> None:
  """Removes object `url`, or every object below prefix `url`."""
  if paths.isfile(url):
    paths.remove(url)
  else:
    paths.rmtree(url)


def publish(local_dir: str, export_dir: str, marker: str) -> None:
  """Uploads the finished export in `local_dir` to URL `export_dir` (see
  the module docstring), replacing what is there (the caller checked that
  it is an export of ours, or a killed upload of one)."""
  partial = paths.join(export_dir, PARTIAL)
  with paths.open_file(partial, "wb"):
    pass
  try:
    old = [n for n in paths.listdir(export_dir) if n != PARTIAL]
  except FileNotFoundError:
    old = []
  for name in sorted(old, key=lambda n: (n != marker, n not in _LOADED_FIRST,
                                         n)):
    _remove(paths.join(export_dir, name))
  files = []
  for top, _, names in os.walk(local_dir):
    files += [os.path.relpath(os.path.join(top, n), local_dir) for n in names]
  for relative in sorted(files, key=_upload_order(marker)):
    paths.upload(os.path.join(local_dir, relative),
                 paths.join(export_dir, *relative.split(os.sep)))
  paths.remove(partial)


def write_to_bucket(export_dir: str, fill: Callable[[str], None],
                    marker: str, disk_full: Callable[[str], ContextManager]
                    ) -> str:
  """`fill(tmp)` writes the export (marker included) into a local scratch
  folder, which is then published at URL `export_dir` (`publish`).
  `disk_full(scratch)`: the context that turns a full local disk into one
  line. Returns `export_dir`."""
  with paths.scratch_dir() as scratch:
    tmp = os.path.join(scratch, "export")
    os.mkdir(tmp)
    with disk_full(scratch):
      fill(tmp)
    publish(tmp, export_dir, marker)
  return export_dir
