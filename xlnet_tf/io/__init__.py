"""Checkpoint I/O, one job a module (imports point down this list):

  report           LoadReport
  original         the original TF1 layout by variable name (load/save)
  native           TF2 object checkpoints (the training loop's)
  hf_config        HuggingFace config.json <-> XLNetConfig / RunOptions / head
  hf_names         original tensor name <-> HF name and layout
  safetensors_file the safetensors framing check and bfloat16 reader
  hf_files         an HF directory on disk (find, check, read, write)
  hf               HF weights into / out of a model
  dims             the model shape a checkpoint fixes, read without loading
                   (`check_config_fits`)
  load             any layout, detected (`load_checkpoint`)

TF checkpoint files themselves (open, read, damage in one line,
`CheckpointError`) are `xlnet_tf.checkpoint_files`, below this package and
the training loop. Building the task model a checkpoint describes needs the
task classes, which sit above this package: `xlnet_tf.pretrained`.
"""

from xlnet_tf.checkpoint_files import (CheckpointError, find_damage,
                                       open_checkpoint)
from xlnet_tf.io.hf import HFLoadReport, HFSaveReport, load_hf_weights
from xlnet_tf.io.hf_config import config_from_hf, config_to_hf
from xlnet_tf.io.hf_files import is_hf_directory, read_hf_config
from xlnet_tf.io.load import (check_checkpoint, check_init_checkpoint,
                              load_checkpoint)
from xlnet_tf.io.native import load_native_checkpoint, save_native_checkpoint
from xlnet_tf.io.original import (load_original_checkpoint,
                                  save_original_checkpoint)
from xlnet_tf.io.report import LoadReport

__all__ = [
    "CheckpointError", "HFLoadReport", "HFSaveReport", "LoadReport",
    "check_checkpoint", "check_init_checkpoint", "config_from_hf",
    "config_to_hf", "find_damage", "is_hf_directory", "load_checkpoint",
    "load_hf_weights", "load_native_checkpoint", "load_original_checkpoint",
    "open_checkpoint", "read_hf_config", "save_native_checkpoint",
    "save_original_checkpoint",
]
