"""Model hyper-parameters (`XLNetConfig`) and run-time options (`RunOptions`).

`XLNetConfig` holds what is fixed by a checkpoint and reads/writes the original
`xlnet_config.json` (same eight keys). `RunOptions` holds what may change from
run to run, under the original run-config names and with the original defaults.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

from data_utils import paths
from data_utils.atomic import write_json
from data_utils.errors import UserError
from data_utils.text_files import read_json


class ConfigError(UserError):
  """A config file or value is wrong; the message names the key and the value."""


# 'gelu' is the original's GELU, the tanh approximation (HuggingFace calls it
# 'gelu_new'); 'gelu_exact' is the erf form, which HuggingFace calls 'gelu' and
# its released XLNet configs name, so their weights run as HF runs them.
_ACTIVATIONS = ("relu", "gelu", "gelu_exact")


# The largest vocabulary a config may declare. Token ids are int32 (2**31 - 1
# is the hard limit), but the word embedding `[n_token, d_model]` is also the
# LM head's softmax and carries two Adam slots: at 2**24 rows even d_model=128
# is 8 GiB of table and 24 GiB with its slots, more than one accelerator
# holds, while the largest SentencePiece vocabularies in use have ~2.5e5
# pieces. A larger value is a typo, not a model.
MAX_N_TOKEN = 2 ** 24


def _check(cond: bool, msg: str):
  if not cond:
    raise ConfigError(msg)


def _is_int(v) -> bool:
  return isinstance(v, int) and not isinstance(v, bool)


@dataclasses.dataclass(frozen=True)
class XLNetConfig:
  """The original `xlnet_config.json`: the shape of a checkpoint.

  Example:
    >>> cfg = XLNetConfig(n_layer=2, d_model=32, n_head=4, d_head=8,
    ...                   d_inner=64, n_token=120)
    >>> cfg.ff_activation, cfg.untie_r
    ('gelu', True)
  """
  n_layer: int
  d_model: int
  n_head: int
  d_head: int
  d_inner: int
  n_token: int
  ff_activation: str = "gelu"
  untie_r: bool = True
  # The file it was read from (for messages); not part of the config.
  path: Optional[str] = dataclasses.field(default=None, compare=False,
                                          repr=False)

  KEYS = ("d_head", "d_inner", "d_model", "ff_activation", "n_head", "n_layer",
          "n_token", "untie_r")

  def __post_init__(self):
    for key in ("n_layer", "d_model", "n_head", "d_head", "d_inner", "n_token"):
      value = getattr(self, key)
      _check(_is_int(value) and value > 0,
             f"XLNetConfig: '{key}' must be a positive integer, got {value!r}")
    _check(self.n_token <= MAX_N_TOKEN,
           f"XLNetConfig: 'n_token' must be at most {MAX_N_TOKEN} (2**24), "
           f"got {self.n_token}")
    _check(self.ff_activation in _ACTIVATIONS,
           f"XLNetConfig: 'ff_activation' must be one of {_ACTIVATIONS}, "
           f"got {self.ff_activation!r}")
    _check(isinstance(self.untie_r, bool),
           f"XLNetConfig: 'untie_r' must be true or false, got {self.untie_r!r}")

  @classmethod
  def from_dict(cls, data: dict, source: str = "config") -> "XLNetConfig":
    _check(isinstance(data, dict),
           f"{source}: expected a JSON object, got {type(data).__name__}")
    missing = [k for k in cls.KEYS if k not in data]
    _check(not missing, f"{source}: missing key(s) {', '.join(missing)}")
    try:
      return cls(**{k: data[k] for k in cls.KEYS})
    except ConfigError as e:
      raise ConfigError(f"{source}: {e}") from None

  @classmethod
  def from_json(cls, path: str) -> "XLNetConfig":
    """Reads an original-format `xlnet_config.json`; extra keys are ignored."""
    if not paths.isfile(path):
      raise ConfigError(f"{path}: no such config file")
    data = read_json(path, ConfigError)
    return dataclasses.replace(cls.from_dict(data, source=path), path=path)

  def to_dict(self) -> dict:
    return {k: getattr(self, k) for k in self.KEYS}

  def to_json(self, path: str) -> None:
    """Writes the original layout (sorted keys, indent 4), atomically."""
    write_json(path, self.to_dict(), indent=4)


def check_vocab(config: XLNetConfig, vocab_size: int, spiece_path: str
                ) -> None:
  """ConfigError unless `config` embeds every id of a `vocab_size`-piece
  SentencePiece model (a smaller n_token fails mid-run on the first larger
  id). Names the config file when `config` was read from one.

  Example:
    >>> check_vocab(XLNetConfig(1, 8, 1, 8, 8, n_token=100), 120, "sp.model")
    Traceback (most recent call last):
    ...
    xlnet_tf.config.ConfigError: model config: n_token 100 is smaller than the vocabulary of --spiece_model_file=sp.model (120 pieces)
  """
  where = (f"--model_config_path={config.path}" if config.path
           else "model config")
  _check(config.n_token >= vocab_size,
         f"{where}: n_token {config.n_token} is smaller than the vocabulary "
         f"of --spiece_model_file={spiece_path} ({vocab_size} pieces)")


@dataclasses.dataclass(frozen=True)
class RunOptions:
  """Run-time options under the original names and with the original defaults.

  attn_type: 'bi' (every position may see every other) or 'uni' (causal).
  mem_len:   tokens of memory cached per layer; 0 = no new memory (as the
             original's flag; None, its RunConfig's value, reads as 0).
  reuse_len: how many leading tokens of the current segment go into memory;
             0 = all of them.
  bi_data:   the batch is [forward half; backward half] (pretraining).
  clamp_len: clamp relative distances to [-clamp_len, clamp_len]; -1 = off.
  same_length: with 'uni', every query sees the same number of keys.
  use_bfloat16 / use_float16: mixed precision (16-bit compute, float32
             weights; float16 needs loss scaling, which the trainer adds).
  recompute: keep only each layer's input for the backward pass and run the
             layer again there (less memory, ~1/3 more compute).
  fast_kernels: True runs the fast paths of `xlnet_tf/kernels`; False the
             reference path, the paper's equations as written (same values,
             slower; for reading, debugging and checking the kernels).

  Example:
    >>> RunOptions().dropout, RunOptions(attn_type="uni").attn_type
    (0.1, 'uni')
  """
  dropout: float = 0.1
  dropatt: float = 0.1
  init: str = "normal"
  init_std: float = 0.02
  init_range: float = 0.1
  mem_len: int = 0
  reuse_len: int = 0
  attn_type: str = "bi"
  bi_data: bool = False
  clamp_len: int = -1
  same_length: bool = False
  use_bfloat16: bool = False
  use_float16: bool = False
  recompute: bool = False
  fast_kernels: bool = True

  def __post_init__(self):
    for key in ("mem_len", "reuse_len"):
      if getattr(self, key) is None:  # the original RunConfig's "none"
        object.__setattr__(self, key, 0)
    _check(not (self.use_bfloat16 and self.use_float16),
           "RunOptions: 'use_bfloat16' and 'use_float16' exclude each other")
    for key in ("dropout", "dropatt"):
      v = getattr(self, key)
      _check(isinstance(v, (int, float)) and 0.0 <= v < 1.0,
             f"RunOptions: '{key}' must be in [0, 1), got {v!r}")
    _check(self.init in ("normal", "uniform"),
           f"RunOptions: 'init' must be 'normal' or 'uniform', got {self.init!r}")
    _check(self.attn_type in ("bi", "uni"),
           f"RunOptions: 'attn_type' must be 'bi' or 'uni', got {self.attn_type!r}")
    for key in ("mem_len", "reuse_len"):
      v = getattr(self, key)
      _check(_is_int(v) and v >= 0,
             f"RunOptions: '{key}' must be a non-negative integer, got {v!r}")
    for key in ("bi_data", "same_length", "use_bfloat16", "use_float16",
                "recompute", "fast_kernels"):
      _check(isinstance(getattr(self, key), bool),
             f"RunOptions: '{key}' must be true or false, "
             f"got {getattr(self, key)!r}")
    _check(_is_int(self.clamp_len),
           f"RunOptions: 'clamp_len' must be an integer, got {self.clamp_len!r}")
    for key in ("init_std", "init_range"):
      v = getattr(self, key)
      _check(isinstance(v, (int, float)) and v > 0,
             f"RunOptions: '{key}' must be positive, got {v!r}")

  def to_dict(self) -> dict:
    return dataclasses.asdict(self)

  @classmethod
  def from_dict(cls, data: dict) -> "RunOptions":
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - names)
    _check(not unknown, f"RunOptions: unknown option(s) {', '.join(unknown)}")
    return cls(**data)

  def replace(self, **changes: Any) -> "RunOptions":
    return dataclasses.replace(self, **changes)
