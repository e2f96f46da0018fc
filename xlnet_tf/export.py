"""SavedModel export with serving signatures (one path for every task).

Multiple choice (RACE): serving_default on `[B, C, L]` features -> logits
`[B, C]` (see `MultipleChoiceServer`).

Classifier / regressor signatures:
  serving_default  input_ids, segment_ids int32 [B, L], input_mask float32
                   [B, L] (1 = padding) -> logits [B, C], probabilities
                   [B, C], class_id int32 [B], label string [B]
                   (regression: score [B])
  serve_text       text string [B] -> the same, tokenized in-graph
  serve_text_pair  text_a, text_b string [B] -> the same

The raw-text signatures build features exactly as `classifier_data.
convert_example` (A <sep> B <sep> <cls>, longest-first truncation, LEFT
padding) with the in-graph tokenizer (`data_utils.graph_tokenizer`). Its TF
Text ops must be registered before loading: `import tensorflow_text` first,
and use `xlnet-saved-model-cli` where you would use `saved_model_cli`.

Every export carries `xlnet_tf_export.json` (its kind: classifier,
regressor, multiple_choice or squad; the files it wrote; the version). An
export replaces only a previous export of the same kind; any other directory
at the path is refused (`check_export_dir`). The export is readable as any
new directory is under the umask (a server may run as another user).
"""

from __future__ import annotations

import ast
import copy
import ctypes
import errno
import json
import os
import re
import secrets
import shutil
import socket
import sys
import time
from typing import Dict, List, Optional, Sequence

import numpy as np
import tensorflow as tf
from absl import flags, logging

from data_utils.classifier_data import SEG_ID_A, SEG_ID_B, SEG_ID_CLS, \
    SEG_ID_PAD
from data_utils.errors import (UsageError, UserError, check_writable_dir,
                               one_line, run_main)
from data_utils.tokenization import CLS_ID, SEP_ID
from xlnet_tf import __version__
from xlnet_tf.tasks import ClassifierTask, MultipleChoiceTask, SquadTask


def _keep(ids: tf.RaggedTensor, n: tf.Tensor) -> tf.RaggedTensor:
  """The first `n[b]` ids of each row."""
  positions = tf.ragged.range(ids.row_lengths(), dtype=n.dtype)
  return tf.ragged.boolean_mask(ids, positions < n[:, None])


def truncation_lengths(len_a, len_b, budget):
  """In-graph `classifier_data.truncate_pair` (int64 tensors)."""
  fits = len_a + len_b <= budget
  short_fits = 2 * tf.minimum(len_a, len_b) <= budget
  a_shorter = len_a < len_b
  keep_a = tf.where(fits, len_a, tf.where(
      short_fits, tf.where(a_shorter, len_a, budget - len_b),
      (budget + 1) // 2))
  keep_b = tf.where(fits, len_b, tf.where(
      short_fits, tf.where(a_shorter, budget - len_a, len_b), budget // 2))
  return keep_a, keep_b


def _left_pad(rows: tf.RaggedTensor, length: int, value) -> tf.Tensor:
  """Ragged `[B, (n)]` (n <= length) -> `[B, length]`, padding on the left."""
  dense = rows.to_tensor(default_value=value, shape=[None, length])
  n = tf.cast(rows.row_lengths(), tf.int32)
  j = tf.range(length)[None, :]
  shift = length - n[:, None]
  source = tf.maximum(j - shift, 0)
  gathered = tf.gather(dense, source, batch_dims=1)
  return tf.where(j >= shift, gathered, tf.cast(value, dense.dtype))


def classifier_features(ids_a: tf.RaggedTensor,
                        ids_b: Optional[tf.RaggedTensor],
                        max_seq_length: int) -> dict:
  """Token ids (ragged) -> model features, as `convert_example`."""
  ids_a = tf.cast(ids_a, tf.int64)
  batch = ids_a.nrows()
  len_a = ids_a.row_lengths()

  def column(value):
    return tf.RaggedTensor.from_tensor(tf.fill([batch, 1], tf.cast(
        value, tf.int64)))

  if ids_b is None:
    a = _keep(ids_a, tf.minimum(len_a, max_seq_length - 2))
    tokens = tf.concat([a, column(SEP_ID), column(CLS_ID)], axis=1)
    segs = tf.concat([tf.zeros_like(a) + SEG_ID_A, column(SEG_ID_A),
                      column(SEG_ID_CLS)], axis=1)
  else:
    ids_b = tf.cast(ids_b, tf.int64)
    len_b = ids_b.row_lengths()
    keep_a, keep_b = truncation_lengths(len_a, len_b,
                                        tf.constant(max_seq_length - 3,
                                                    tf.int64))
    # With an empty B the original truncates A alone, to L - 2.
    keep_a = tf.where(len_b > 0, keep_a,
                      tf.minimum(len_a, max_seq_length - 2))
    a, b = _keep(ids_a, keep_a), _keep(ids_b, keep_b)
    has_b = keep_b > 0  # an empty B is no B, as the original
    b_sep = tf.ragged.boolean_mask(column(SEP_ID), has_b[:, None])
    tokens = tf.concat([a, column(SEP_ID), b, b_sep, column(CLS_ID)], axis=1)
    segs = tf.concat([tf.zeros_like(a) + SEG_ID_A, column(SEG_ID_A),
                      tf.zeros_like(b) + SEG_ID_B,
                      tf.zeros_like(b_sep) + SEG_ID_B, column(SEG_ID_CLS)],
                     axis=1)
  input_ids = _left_pad(tokens, max_seq_length, 0)
  segment_ids = _left_pad(segs, max_seq_length, SEG_ID_PAD)
  real = _left_pad(tf.ones_like(tokens), max_seq_length, 0)
  return {"input_ids": tf.cast(input_ids, tf.int32),
          "segment_ids": tf.cast(segment_ids, tf.int32),
          "input_mask": 1.0 - tf.cast(real, tf.float32)}


class ClassifierServer(tf.Module):
  """The exported object: the model, the tokenizer and the signatures."""

  def __init__(self, model, max_seq_length: int, regression: bool,
               labels: Optional[Sequence[str]] = None, tokenizer=None):
    super().__init__()
    self.model = model
    self.max_seq_length = max_seq_length
    self.regression = regression
    self.labels = tf.constant([str(x) for x in (labels or [])] or [""])
    self.tokenizer = tokenizer

  def _outputs(self, features):
    out = self.model(features, training=False)
    if self.regression:
      return {"score": out["score"]}
    class_id = tf.argmax(out["logits"], axis=-1, output_type=tf.int32)
    return {"logits": out["logits"], "probabilities": out["probabilities"],
            "class_id": class_id, "label": tf.gather(self.labels, class_id)}

  def serve_features(self, input_ids, segment_ids, input_mask):
    return self._outputs({"input_ids": input_ids, "segment_ids": segment_ids,
                          "input_mask": input_mask})

  def serve_text(self, text):
    ids = self.tokenizer.tokenize(text)
    return self._outputs(classifier_features(ids, None, self.max_seq_length))

  def serve_text_pair(self, text_a, text_b):
    return self._outputs(classifier_features(
        self.tokenizer.tokenize(text_a), self.tokenizer.tokenize(text_b),
        self.max_seq_length))

  def signatures(self) -> dict:
    length = self.max_seq_length
    sigs = {"serving_default": tf.function(self.serve_features).get_concrete_function(
        tf.TensorSpec([None, length], tf.int32, "input_ids"),
        tf.TensorSpec([None, length], tf.int32, "segment_ids"),
        tf.TensorSpec([None, length], tf.float32, "input_mask"))}
    if self.tokenizer is not None:
      sigs["serve_text"] = tf.function(self.serve_text).get_concrete_function(
          tf.TensorSpec([None], tf.string, "text"))
      sigs["serve_text_pair"] = tf.function(
          self.serve_text_pair).get_concrete_function(
              tf.TensorSpec([None], tf.string, "text_a"),
              tf.TensorSpec([None], tf.string, "text_b"))
    return sigs


class MultipleChoiceServer(tf.Module):
  """serving_default: input_ids, segment_ids int32 `[B, C, L]`, input_mask
  float32 `[B, C, L]` -> logits, probabilities `[B, C]`, class_id `[B]`."""

  def __init__(self, model, n_choice: int, max_seq_length: int):
    super().__init__()
    self.model = model
    self.n_choice = n_choice
    self.max_seq_length = max_seq_length

  def serve_features(self, input_ids, segment_ids, input_mask):
    out = self.model({"input_ids": input_ids, "segment_ids": segment_ids,
                      "input_mask": input_mask}, training=False)
    return {"logits": out["logits"], "probabilities": out["probabilities"],
            "class_id": tf.argmax(out["logits"], -1, output_type=tf.int32)}

  def signatures(self) -> dict:
    shape = [None, self.n_choice, self.max_seq_length]
    return {"serving_default": tf.function(
        self.serve_features).get_concrete_function(
            tf.TensorSpec(shape, tf.int32, "input_ids"),
            tf.TensorSpec(shape, tf.int32, "segment_ids"),
            tf.TensorSpec(shape, tf.float32, "input_mask"))}


# Export directories -------------------------------------------------------
#
# An export only ever replaces a previous export of the same kind, which it
# recognises by the marker file every export carries. Anything else at the
# path (a user's directory, a checkpoint folder, an export of another kind or
# one older than the marker) is refused with one line, before training and
# again at export time.

EXPORT_MARKER = "xlnet_tf_export.json"
MARKER_FORMAT = 1
# One kind per serving contract (the signatures' inputs and outputs): a
# regressor answers `score`, a classifier `logits`/`label`..., so a client of
# one cannot use the other.
EXPORT_KINDS = ("classifier", "regressor", "multiple_choice", "squad")

# What `tf.saved_model.save` writes at the top of an export, plus the marker;
# `<name>.tmp<hex>` is TF's own temp file (a killed save may leave one).
_EXPORT_ENTRY = re.compile(
    r"^(saved_model\.pb(txt)?|fingerprint\.pb|variables|assets|assets\.extra|"
    + re.escape(EXPORT_MARKER) + r")(\.tmp[0-9a-f]*)?$")

# Temp directories beside the target: `.tmp-export-<host>-<pid>-<8 hex>`
# (`-old` for a replaced export being removed). The host and pid say who
# writes it, so a leftover is removed only once its writer is gone: a live
# export (even one taking hours) and another host's on a shared disk stay.
EXPORT_TEMP_PREFIX = ".tmp-export-"
_TEMP_NAME = re.compile(
    r"^\.tmp-export-(?P<host>.+)-(?P<pid>\d+)-[0-9a-f]{8}(-old)?$")
# Versions before the marker used `tempfile.mkdtemp` names, without a writer:
# those are removed only after a day without change (no export takes that
# long between writes).
_LEGACY_TEMP_NAME = re.compile(r"^\.tmp-export-[a-z0-9_]{8}(-old)?$")
LEGACY_TEMP_AGE = 24 * 3600.0
# What training writes in model_dir (checkpoints, summaries, worker dirs):
# an export there would collide with it.
_TRAINING_ENTRY = re.compile(r"^(checkpoint|ckpt-.*|train|\.worker_.*)$")


def _host() -> str:
  # Hostnames are letters, digits, "-" and "."; anything else becomes "_".
  return re.sub(r"[^A-Za-z0-9.-]", "_", socket.gethostname()) or "host"


def _pid_alive(pid: int) -> bool:
  if pid <= 0:
    return True  # not a pid we could have written: keep
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except (PermissionError, OverflowError):
    return True  # another user's live process, or not a pid: keep
  return True


def _inside(path: str, directory: str) -> bool:
  """True if real path `path` lies strictly under real path `directory`."""
  return path != directory and path.startswith(
      directory.rstrip(os.sep) + os.sep)


def _only_export_entries(names) -> bool:
  return all(_EXPORT_ENTRY.match(n) for n in names)


def read_export_marker(export_dir: str) -> Optional[dict]:
  """The marker of the xlnet-tf export in `export_dir` (`{"kind", "files",
  "xlnet_tf_version", ...}`), None if there is none or it is damaged."""
  try:
    with open(os.path.join(export_dir, EXPORT_MARKER), encoding="utf-8") as f:
      marker = json.load(f)
  except (OSError, ValueError):
    return None
  if not isinstance(marker, dict) or marker.get("kind") not in EXPORT_KINDS \
      or not isinstance(marker.get("files", []), list):
    return None
  return marker


def check_export_dir(export_dir: str, kind: str, flag: str = "export_dir",
                     keep: Optional[Dict[str, str]] = None,
                     model_dir: Optional[str] = None) -> None:
  """Raises a one-line UserError naming `--flag=export_dir` unless an export
  of `kind` may be written there: a path that does not exist yet, an empty
  directory, or an xlnet-tf export of the same kind holding only what it
  wrote. `keep` maps flag names to paths the run reads or writes: the export
  may be none of them, nor contain one; inside `model_dir` it may not take a
  name training writes. Writes nothing."""
  if kind not in EXPORT_KINDS:
    raise ValueError(f"unknown export kind {kind!r}")
  where = f"--{flag}={export_dir}"
  if not export_dir:
    raise UsageError(f"--{flag} is required")
  real = os.path.realpath(export_dir)
  for name, path in (keep or {}).items():
    if not path:
      continue
    other = os.path.realpath(path)
    if other == real:
      raise UsageError(f"{where}: is also --{name}; the export would replace "
                       "it; choose another directory")
    if _inside(other, real):
      raise UsageError(f"{where}: contains --{name}={path}; the export would "
                       "replace it; choose another directory")
  if model_dir and _inside(real, os.path.realpath(model_dir)):
    first = os.path.relpath(real, os.path.realpath(model_dir)).split(os.sep)[0]
    if _TRAINING_ENTRY.match(first):
      raise UsageError(f"{where}: training writes '{first}' in --model_dir="
                       f"{model_dir}; choose another directory")
  if not os.path.exists(real):
    check_writable_dir(export_dir, flag)
    return
  if not os.path.isdir(real):
    raise UsageError(f"{where}: is a file, not an export directory; choose "
                     "another path")
  names = os.listdir(real)
  if names:
    if EXPORT_MARKER not in names:
      if "saved_model.pb" in names or "saved_model.pbtxt" in names:
        raise UserError(
            f"{where}: holds a SavedModel without {EXPORT_MARKER} (older "
            "than this check, or not an xlnet-tf export); remove it yourself "
            "or choose another directory")
      raise UserError(
          f"{where}: exists and is not an xlnet-tf {kind} export (no "
          f"{EXPORT_MARKER}); choose another directory or remove it yourself")
    marker = read_export_marker(real)
    if marker is None:
      raise UserError(f"{where}: its {EXPORT_MARKER} is damaged; choose "
                      "another directory or remove it yourself")
    if marker["kind"] != kind:
      raise UserError(
          f"{where}: holds an xlnet-tf {marker['kind']} export, not a {kind} "
          "export; choose another directory or remove it yourself")
    extra = sorted(set(names) - set(marker.get("files", [])) -
                   {EXPORT_MARKER})
    if extra:
      raise UserError(
          f"{where}: holds files the export did not write ("
          f"{', '.join(extra[:3])}{', ...' if len(extra) > 3 else ''}); move "
          "them out or choose another directory")
  parent = os.path.dirname(real)
  if not os.access(parent, os.W_OK | os.X_OK):
    raise UsageError(f"{where}: {parent} is not writable")


def task_export_kind(task) -> str:
  """The export kind of a fine-tuning `TrainTask`."""
  if isinstance(task, SquadTask):
    return "squad"
  if isinstance(task, MultipleChoiceTask):
    return "multiple_choice"
  if isinstance(task, ClassifierTask):
    return "regressor" if task.regression else "classifier"
  raise ValueError(f"no SavedModel export for {type(task).__name__}")


def default_export_dir(opts) -> str:
  """Where a fine-tuning run (`FinetuneOptions`) exports."""
  return opts.export_dir or os.path.join(opts.train.model_dir, "saved_model")


def check_finetune_export(opts, task) -> None:
  """The preflight check of a fine-tuning run's export (only a training run
  exports): see `check_export_dir`."""
  if not opts.do_train:
    return
  model_dir = opts.train.model_dir
  check_export_dir(default_export_dir(opts), task_export_kind(task), keep={
      "model_dir": model_dir, "output_dir": opts.output_dir,
      "data_dir": opts.data_dir,
      "predict_dir": opts.predict_dir or os.path.join(model_dir,
                                                      "predictions"),
      "spiece_model_file": opts.spiece_model_file,
      "init_checkpoint": opts.train.init_checkpoint}, model_dir=model_dir)


def remove_stale_export_temps(directory: str) -> List[str]:
  """Removes, in `directory`, the temp directories of interrupted exports of
  this project: named with our prefix, holding nothing but SavedModel
  entries, and whose writer (on this host) is gone (for the pre-marker names,
  unchanged for `LEGACY_TEMP_AGE`). Returns their paths; anything else stays.
  """
  removed = []
  try:
    names = sorted(os.listdir(directory))
  except FileNotFoundError:
    return removed
  host, now = _host(), time.time()
  for name in names:
    path = os.path.join(directory, name)
    match = _TEMP_NAME.match(name)
    try:
      if match:
        if match.group("host") != host or _pid_alive(int(match.group("pid"))):
          continue
      elif not (_LEGACY_TEMP_NAME.match(name) and
                now - os.lstat(path).st_mtime > LEGACY_TEMP_AGE):
        continue
      if os.path.islink(path) or not os.path.isdir(path) or \
          not _only_export_entries(os.listdir(path)):
        continue
    except FileNotFoundError:
      continue  # another run removed it first
    shutil.rmtree(path, ignore_errors=True)
    removed.append(path)
  return removed


def _umask() -> int:
  # /proc says it without changing it (os.umask sets it, process-wide).
  try:
    with open("/proc/self/status", encoding="ascii") as f:
      for line in f:
        if line.startswith("Umask:"):
          return int(line.split()[1], 8)
  except (OSError, ValueError):
    pass
  mask = os.umask(0o022)
  os.umask(mask)
  return mask


def _set_ordinary_modes(root: str) -> None:
  """Directories 0777 and files 0666 less the umask, as any new file gets
  (TF writes some with fixed modes): a server running as another user can
  read the export when the umask lets it."""
  mask = _umask()
  for dirpath, dirnames, filenames in os.walk(root, topdown=False):
    for name in filenames:
      path = os.path.join(dirpath, name)
      if not os.path.islink(path):
        os.chmod(path, 0o666 & ~mask)
    for name in dirnames:
      path = os.path.join(dirpath, name)
      if not os.path.islink(path):
        os.chmod(path, 0o777 & ~mask)
  os.chmod(root, 0o777 & ~mask)


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _exchange(a: str, b: str) -> bool:
  """Swaps two paths in one step (Linux `renameat2(RENAME_EXCHANGE)`); False
  where the system or file system cannot."""
  if not sys.platform.startswith("linux"):
    return False
  try:
    renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
  except (OSError, AttributeError):
    return False
  renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int,
                        ctypes.c_char_p, ctypes.c_uint]
  if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b),
               _RENAME_EXCHANGE) == 0:
    return True
  err = ctypes.get_errno()
  if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
    return False
  raise OSError(err, os.strerror(err), a, None, b)


def _remove_replaced(path: str) -> None:
  """Removes a replaced export (or empty directory) now at temp `path`; if
  something not ours appeared in it meanwhile, it is left there."""
  names = os.listdir(path)
  if not names:
    os.rmdir(path)
  elif read_export_marker(path) is not None and _only_export_entries(names):
    shutil.rmtree(path, ignore_errors=True)
  else:
    logging.warning("left %s in place: it holds files the export did not "
                    "write", path)


def save_atomically(module: tf.Module, signatures: dict, export_dir: str,
                    kind: str) -> str:
  """`tf.saved_model.save` into a temp directory beside `export_dir`, with
  the marker of `kind` and ordinary permissions, then moved into place. Only
  a path `check_export_dir` accepts is written; a previous export is swapped
  out in one step (or, where the file system cannot, renamed aside first),
  so a killed export leaves the old export or the new one, plus at most a
  temp directory that the next export removes. Returns `export_dir`."""
  check_export_dir(export_dir, kind)
  target = os.path.realpath(export_dir)
  parent = os.path.dirname(target)
  os.makedirs(parent, exist_ok=True)
  for path in remove_stale_export_temps(parent):
    logging.info("removed %s, left by an interrupted export", path)
  tmp = os.path.join(parent, f"{EXPORT_TEMP_PREFIX}{_host()}-{os.getpid()}-"
                     f"{secrets.token_hex(4)}")
  os.mkdir(tmp)
  try:
    tf.saved_model.save(module, tmp, signatures=signatures)
    marker = {"format": MARKER_FORMAT, "kind": kind,
              "files": sorted(os.listdir(tmp)),
              "signatures": sorted(signatures),
              "xlnet_tf_version": __version__}
    with open(os.path.join(tmp, EXPORT_MARKER), "w", encoding="utf-8") as f:
      f.write(json.dumps(marker, indent=2, sort_keys=True) + "\n")
    _set_ordinary_modes(tmp)
    if not os.path.isdir(target):
      os.rename(tmp, target)  # fails, writing nothing, if a file appeared
    elif _exchange(tmp, target):
      _remove_replaced(tmp)  # `tmp` now names the previous export
    else:
      old = tmp + "-old"
      os.rename(target, old)
      os.rename(tmp, target)
      _remove_replaced(old)
  finally:
    if os.path.isdir(tmp) and _only_export_entries(os.listdir(tmp)):
      shutil.rmtree(tmp, ignore_errors=True)
  return export_dir


def export_classifier(model, export_dir: str, max_seq_length: int,
                      regression: bool, labels=None,
                      sp_model_path: Optional[str] = None,
                      lower: bool = False) -> str:
  """Exports a classifier/regressor; with `sp_model_path` the raw-text
  signatures too. Returns the export directory."""
  kind = "regressor" if regression else "classifier"
  check_export_dir(export_dir, kind)
  tokenizer = None
  if sp_model_path:
    from data_utils.graph_tokenizer import GraphTokenizer
    tokenizer = GraphTokenizer(sp_model_path, lower=lower)
  server = ClassifierServer(model, max_seq_length, regression, labels,
                            tokenizer)
  return save_atomically(server, server.signatures(), export_dir, kind)


def export_multiple_choice(model, export_dir: str, n_choice: int,
                           max_seq_length: int) -> str:
  check_export_dir(export_dir, "multiple_choice")
  server = MultipleChoiceServer(model, n_choice, max_seq_length)
  return save_atomically(server, server.signatures(), export_dir,
                         "multiple_choice")


SQUAD_OUTPUTS = ("start_top_log_probs", "start_top_index",
                 "end_top_log_probs", "end_top_index", "cls_logits")


class SquadServer(tf.Module):
  """serving_default: input_ids, segment_ids int32 `[B, L]`, input_mask,
  p_mask float32 `[B, L]` (1 = padding / not an answer boundary), cls_index
  int32 `[B]` -> start_top_log_probs, start_top_index `[B, S]`,
  end_top_log_probs, end_top_index `[B, S * E]` (entry `s * E + e` = the
  e-th end of the s-th start) and cls_logits `[B]` (answer-class logit,
  higher = more likely no answer). Features as `data_utils.squad_data`."""

  def __init__(self, model, max_seq_length: int):
    super().__init__()
    self.model = model
    self.max_seq_length = max_seq_length

  def serve_features(self, input_ids, segment_ids, input_mask, p_mask,
                     cls_index):
    out = self.model({"input_ids": input_ids, "segment_ids": segment_ids,
                      "input_mask": input_mask, "p_mask": p_mask,
                      "cls_index": cls_index}, training=False)
    return {k: out[k] for k in SQUAD_OUTPUTS}

  def signatures(self) -> dict:
    shape = [None, self.max_seq_length]
    return {"serving_default": tf.function(
        self.serve_features).get_concrete_function(
            tf.TensorSpec(shape, tf.int32, "input_ids"),
            tf.TensorSpec(shape, tf.int32, "segment_ids"),
            tf.TensorSpec(shape, tf.float32, "input_mask"),
            tf.TensorSpec(shape, tf.float32, "p_mask"),
            tf.TensorSpec([None], tf.int32, "cls_index"))}


def export_squad(model, export_dir: str, max_seq_length: int,
                 start_n_top: int = 5, end_n_top: int = 5) -> str:
  """Exports an `XLNetForQuestionAnswering`; its beam must be the asked
  `start_n_top` x `end_n_top` (it fixes the output shapes). Returns the
  export directory."""
  beam = (getattr(model, "start_n_top", None), getattr(model, "end_n_top",
                                                         None))
  if beam != (start_n_top, end_n_top):
    raise UsageError(f"the model's beam is {beam[0]} x {beam[1]}, the export "
                     f"asks {start_n_top} x {end_n_top}")
  check_export_dir(export_dir, "squad")
  server = SquadServer(model, max_seq_length)
  return save_atomically(server, server.signatures(), export_dir, "squad")


# xlnet-saved-model-cli ------------------------------------------------------

CLI_PROGRAM = "xlnet-saved-model-cli"
_HELP = {"-h", "--help", "-help", "--helpfull", "-helpfull", "--helpshort",
         "-helpshort"}
# The flags of TF's saved_model_cli this wrapper checks before delegating.
_CLI_CHECKED = ("dir", "tag_set", "signature_def", "inputs", "input_exprs",
                "input_examples")


def _cli_flag_values(argv: List[str], cli_module):
  """Parses `argv` with a private copy of TF's saved_model_cli flags (the
  global ones stay unparsed for TF's own run); returns (command, values)."""
  own = flags.FlagValues()
  for flag in flags.FLAGS.get_flags_for_module(cli_module.__name__):
    own[flag.name] = copy.deepcopy(flag)
  try:
    rest = own(argv, known_only=True)
  except flags.Error as e:
    raise UsageError(one_line(e)) from e
  command = next((a for a in rest[1:] if not a.startswith("-")), None)
  return command, {name: own[name].value for name in _CLI_CHECKED}


def _shape_text(dims) -> str:
  return "[" + ", ".join("None" if d is None or d < 0 else str(d)
                         for d in dims) + "]"


def _check_cli_value(key: str, value, info, signature: str) -> None:
  """An --input_exprs value against the signature's TensorInfo `info`."""
  array = np.asarray(value)
  dtype = tf.as_dtype(info.dtype)
  if not info.tensor_shape.unknown_rank:
    want = [d.size for d in info.tensor_shape.dim]
    if array.ndim != len(want) or any(
        w >= 0 and w != g for w, g in zip(want, array.shape)):
      raise UsageError(
          f"--input_exprs: input '{key}' has shape {_shape_text(array.shape)}"
          f", signature '{signature}' takes {_shape_text(want)}")
  strings = array.dtype.kind in "US" or (
      array.dtype.kind == "O" and all(isinstance(x, (str, bytes))
                                      for x in array.flat))
  numbers = array.dtype.kind in "biuf"
  if (dtype == tf.string and not strings) or (
      dtype != tf.string and not numbers):
    raise UsageError(
        f"--input_exprs: input '{key}' has {array.dtype.name} values, "
        f"signature '{signature}' takes {dtype.name}")


def check_saved_model_cli_args(command: Optional[str], values: dict,
                               cli_module) -> None:
  """Checks what TF's saved_model_cli `show`/`run` would fail on with a
  traceback, against the SavedModel itself: the directory, the tag-set, the
  signature, and the inputs (keys, `--input_exprs` literals and their
  shape/type). Raises a one-line UsageError naming the flag."""
  if command not in ("show", "run", "scan", "convert", "freeze_model",
                     "aot_compile_cpu"):
    return  # no command, or help: TF's own usage message
  directory = values["dir"]
  if command == "aot_compile_cpu" and not directory:
    return
  required = ("dir", "tag_set", "signature_def") if command == "run" else (
      "dir",)
  for name in required:
    if values[name] is None:
      raise UsageError(f"--{name} is required for {command}")
  if not os.path.exists(directory):
    raise UsageError(f"--dir={directory}: no such directory")
  if not os.path.isdir(directory):
    raise UsageError(f"--dir={directory}: is a file, not a SavedModel "
                     "directory")
  if not any(os.path.isfile(os.path.join(directory, n))
             for n in ("saved_model.pb", "saved_model.pbtxt")):
    raise UsageError(f"--dir={directory}: no SavedModel there (no "
                     "saved_model.pb)")
  try:
    saved_model = cli_module.saved_model_utils.read_saved_model(directory)
  except (IOError, ValueError) as e:
    raise UsageError(f"--dir={directory}: unreadable SavedModel "
                     f"({one_line(e)})") from e
  tag_set = values["tag_set"]
  if command not in ("show", "run") or tag_set is None:
    return
  wanted = {t for t in tag_set.split(",") if t}
  graphs = {frozenset(g.meta_info_def.tags): g for g in saved_model.meta_graphs}
  if frozenset(wanted) not in graphs:
    have = "; ".join(sorted(",".join(sorted(t)) for t in graphs)) or "none"
    raise UsageError(f"--tag_set={tag_set}: no such tag-set in {directory}; "
                     f"it has: {have}")
  graph = graphs[frozenset(wanted)]
  signature = values["signature_def"]
  if signature is None:
    return
  if signature not in graph.signature_def:
    # `__saved_model_init_op` and the like are TF's, not for running.
    have = sorted(s for s in graph.signature_def if not s.startswith("__"))
    raise UsageError(f"--signature_def={signature}: no such signature in "
                     f"{directory}; it has: {', '.join(have)}")
  if command != "run":
    return
  _check_cli_inputs(values, graph.signature_def[signature].inputs, signature,
                    cli_module)


def _check_cli_inputs(values: dict, inputs, signature: str,
                      cli_module) -> None:
  """The run inputs: given, parseable, named as the signature's inputs, and
  (for literals) of its shapes and types."""
  if not (values["inputs"] or values["input_exprs"] or
          values["input_examples"]):
    raise UsageError("run needs --inputs, --input_exprs or --input_examples")
  given = {}
  try:
    for key in cli_module.preprocess_inputs_arg_string(values["inputs"] or ""):
      given[key] = "--inputs"
  except RuntimeError as e:
    raise UsageError(one_line(e)) from e
  exprs = {}
  for item in filter(None, (values["input_exprs"] or "").split(";")):
    if "=" not in item:
      raise UsageError(f"--input_exprs: {item}: expected <input_key>="
                       "<python literal>")
    key, expr = item.split("=", 1)
    try:
      exprs[key] = ast.literal_eval(expr)
    except (ValueError, SyntaxError, TypeError, MemoryError,
            RecursionError) as e:
      raise UsageError(f"--input_exprs: {item}: the value is not a Python "
                       "literal") from e
    given[key] = "--input_exprs"
  for item in filter(None, (values["input_examples"] or "").split(";")):
    given[item.split("=", 1)[0]] = "--input_examples"
  names = ", ".join(sorted(inputs))
  for key, flag in given.items():
    if key not in inputs:
      raise UsageError(f"{flag}: '{key}' is not an input of signature "
                       f"'{signature}'; its inputs: {names}")
  missing = sorted(set(inputs) - set(given))
  if missing:
    raise UsageError(f"signature '{signature}' takes inputs {names}; missing: "
                     f"{', '.join(missing)}")
  for key, value in exprs.items():
    _check_cli_value(key, value, inputs[key], signature)


def _saved_model_cli() -> int:
  # Both imported only here: TF Text is heavy, and TF's CLI module defines
  # global absl flags (--dir, ...) no other entry point should carry.
  import tensorflow_text  # noqa: F401  (registers the ops)
  from tensorflow.python.tools import saved_model_cli
  argv = ["saved_model_cli"] + sys.argv[1:]
  command, values = _cli_flag_values(argv, saved_model_cli)
  if not _HELP.intersection(a.split("=")[0] for a in argv[1:]):
    check_saved_model_cli_args(command, values, saved_model_cli)
  sys.argv[:] = argv
  try:
    return saved_model_cli.main()
  except (RuntimeError, ValueError, tf.errors.InvalidArgumentError) as e:
    # What TF's CLI itself refuses (an --inputs file without the named
    # array, an existing --outdir file, a value the graph rejects): its
    # message, on one line.
    message = e.message if isinstance(e, tf.errors.OpError) else str(e)
    raise UserError(one_line(message.strip().splitlines()[0] if
                             message.strip() else type(e).__name__)) from e


def saved_model_cli_main():
  """`xlnet-saved-model-cli`: TensorFlow's `saved_model_cli` with TF Text's
  ops registered (the raw-text signatures use them, and any process can only
  load them after `import tensorflow_text`). What the stock CLI answers with
  a traceback (a missing directory, an unknown tag-set or signature, a bad
  input key, literal or shape) is one line `xlnet-saved-model-cli: ...`
  with exit code 2."""
  sys.exit(run_main(CLI_PROGRAM, _saved_model_cli))
