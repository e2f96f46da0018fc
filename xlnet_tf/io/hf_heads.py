"""What several task heads share in an HF `config.json`: the sequence
summary (pooled heads) and the classes (`num_labels`, `id2label`,
`label2id`, `finetuning_task`). Each task's `formats.py` composes its head's
fields from these (`TaskSpec.hf_head`, `hf_fields`)."""

from __future__ import annotations

from typing import List

from xlnet_tf.checkpoint_files import CheckpointError
from xlnet_tf.config import ConfigError

# The summaries transformers computes (the original's attn is not one).
HF_SUMMARY_TYPES = ("last", "first", "mean")


# The sequence summary's weights (`sequnece_summary`: misspelled as in the
# original's checkpoints): (original pattern, HF name, transpose).
SUMMARY_NAMES = (
    (r"model/sequnece_summary/summary/kernel",
     "sequence_summary.summary.weight", True),
    (r"model/sequnece_summary/summary/bias",
     "sequence_summary.summary.bias", False),
)


def is_count(v) -> bool:
  return isinstance(v, int) and not isinstance(v, bool) and v > 0


def summary_head(data: dict, source: str, notes: List[str]) -> dict:
  """summary_* keys -> SequenceSummary arguments, refusing what differs."""
  summary_type = data.get("summary_type", "last")
  if summary_type == "cls_index":
    # HF's cls_index summary without a cls_index takes the last token.
    notes.append("summary_type 'cls_index' imported as 'last' (what HF does "
                 "when no cls_index is passed)")
    summary_type = "last"
  if summary_type not in HF_SUMMARY_TYPES:
    raise ConfigError(f"{source}: summary_type {summary_type!r} cannot be "
                      "represented (use last, first, mean or cls_index)")
  use_proj = bool(data.get("summary_use_proj", True))
  if data.get("summary_proj_to_labels"):
    raise ConfigError(f"{source}: summary_proj_to_labels=true cannot be "
                      "represented (the summary projection here keeps d_model)")
  activation = data.get("summary_activation")
  activation = None if activation in (None, "", "linear") else activation
  if use_proj and activation != "tanh":
    raise ConfigError(f"{source}: summary_activation {activation!r} cannot be "
                      "represented (the summary projection here is tanh, as "
                      "the original's)")
  if not use_proj and activation is not None:
    raise ConfigError(f"{source}: summary_activation {activation!r} without "
                      "a projection cannot be represented")
  if (data.get("summary_first_dropout") or 0) > 0:
    notes.append("summary_first_dropout is not applied here (training only)")
  return {"summary_type": summary_type, "use_summ_proj": use_proj}


def summary_fields(head: dict) -> dict:
  """The config.json summary entries of a pooled head (`summary_type`,
  `use_summ_proj`; none without them); CheckpointError for a summary HF
  cannot compute."""
  if "summary_type" not in head:
    return {}
  if head["summary_type"] not in HF_SUMMARY_TYPES:
    raise CheckpointError(
        f"summary_type {head['summary_type']!r} cannot be represented: "
        "transformers' XLNet summary supports last, first and mean")
  # No projection, no activation: HF would apply tanh to the raw state
  # (and transformers 5 refuses null, so "linear", its identity).
  use_proj = head.get("use_summ_proj", True)
  return {"summary_type": head["summary_type"], "summary_use_proj": use_proj,
          "summary_activation": "tanh" if use_proj else "linear"}


def class_head(data: dict, source: str) -> dict:
  """n_class, labels (when id2label is given) and task_name of a
  classification config. id2label decides the count, as in transformers; a
  num_labels that disagrees or ids that are not 0..C-1 are refused."""
  count, id2label = data.get("num_labels"), data.get("id2label")
  if count is not None and not is_count(count):
    raise ConfigError(f"{source}: num_labels {count!r} is not a positive "
                      "count")
  head = {"n_class": 2 if count is None else count}
  if id2label:
    try:
      by_id = {int(k): str(v) for k, v in dict(id2label).items()}
    except (TypeError, ValueError):
      raise ConfigError(f"{source}: id2label must map integer ids to label "
                        "names") from None
    if sorted(by_id) != list(range(len(by_id))):
      raise ConfigError(f"{source}: id2label ids are not 0..{len(by_id) - 1}")
    if count is not None and count != len(by_id):
      raise ConfigError(f"{source}: num_labels {count} does not match the "
                        f"{len(by_id)} labels of id2label")
    head.update(n_class=len(by_id), labels=[by_id[i] for i in sorted(by_id)])
  if data.get("finetuning_task"):
    head["task_name"] = str(data["finetuning_task"])
  return head


def class_fields(head: dict) -> dict:
  """num_labels, id2label (JSON keys are strings), label2id and
  finetuning_task of a head of `n_class` classes (None: 1, a score) named
  `labels` (by id; None: HF's LABEL_<i>)."""
  n_class = head.get("n_class") or 1
  labels = head.get("labels")
  if labels is None:
    labels = [f"LABEL_{i}" for i in range(n_class)]
  labels = [str(name) for name in labels]
  if len(labels) != n_class:
    raise CheckpointError(f"{len(labels)} labels given for a head of "
                          f"{n_class} classes")
  if len(set(labels)) != n_class:
    raise CheckpointError("repeated label names cannot be represented "
                          "(HF's label2id maps each name to one id)")
  return {"num_labels": n_class,
          "id2label": {str(i): name for i, name in enumerate(labels)},
          "label2id": {name: i for i, name in enumerate(labels)},
          "finetuning_task": head.get("task_name")}
