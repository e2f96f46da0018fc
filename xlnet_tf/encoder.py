"""`XLNetModel`: embeddings, relative positions, masks, the layer stack and the
Transformer-XL memory (the original's `transformer_xl`, batch-major).

Inputs (batch-major, B batch, L length, M memory, P predictions, D d_model):
  input_ids      [B, L] int32
  segment_ids    [B, L] int32 or None (no segment term then)
  input_mask     [B, L] float, 1 = padding
  mems           list of n_layer `[B, M, D]` or None
  mems_mask      [B, M] float, 1 = a memory position nobody may attend to
                 (padding, or no memory yet); None = all memory visible
  perm_mask      [B, L, L] float, [b, i, j] = 1: query i may not attend key j
  target_mapping [B, P, L] float one-hot rows (two-stream with P predictions)
  input_q        [B, L] float, 1 = prediction target; its presence switches
                 the query stream on
  output_positions
                 [B, P] int32: the last layer computes the content stream
                 only at these positions (a pooled head reads one)
  mem_len, reuse_len  per-call overrides of the options' (a decoding cache
                 keeps a memory the run options know nothing of)
Outputs (a dict):
  sequence_output  [B, L, D] content stream (`[B, P, D]` with
                   output_positions), or the query stream `[B, P, D]`
                   (`[B, L, D]` without target_mapping) when two-stream
  new_mems         list of n_layer `[B, mem_len, D]`, or None when mem_len is
                   0: each layer's INPUT, first `reuse_len` positions
                   appended to the old memory, gradient stopped (unless
                   `memory_gradient`). Its mask is `masks.memory_mask`.
  hidden_states    with `return_hidden_states`: n_layer + 1 `[B, L, D]`
                   content states, the embedding output then each layer's
                   output (HF's `output_hidden_states` order)
"""

from __future__ import annotations

from typing import List, Optional

import tensorflow as tf
import tf_keras as keras

from xlnet_tf.building import build_once, unconverted
from xlnet_tf.config import RunOptions, XLNetConfig
from xlnet_tf.initializers import fresh, get_initializer
from xlnet_tf.precision import dtype_policy
from xlnet_tf.layers import (PositionwiseFFN, RelativeAttention,
                             RelativePositionEncoding, SeededDropout)
from xlnet_tf.masks import attention_masks, segment_matrix
from xlnet_tf.seeds import next_seed, sub_seed


# Dropout sites of `XLNetModel.call` under its seed besides layer i's (i).
_EMBEDDING_SITE, _QUERY_SITE, _POSITION_SITE, _OUTPUT_SITE = -1, -2, -3, -4


def cache_memory(layer_input: tf.Tensor, prev_mem: Optional[tf.Tensor],
                 mem_len: int, reuse_len: int = 0,
                 stop_gradient: bool = True) -> Optional[tf.Tensor]:
  """New memory `[B, mem_len, D]` from a layer's input `[B, L, D]`: the first
  `reuse_len` positions (0 = all) after the old memory, the last `mem_len`
  kept, gradient stopped (`stop_gradient`, Transformer-XL's truncated
  back-propagation); None when `mem_len` is 0.

  Example:
    >>> x = tf.reshape(tf.range(4.0), [1, 4, 1])
    >>> cache_memory(x, None, mem_len=3, reuse_len=2)[0, :, 0].numpy().tolist()
    [0.0, 1.0]
    >>> old = tf.constant([[[9.0]]])
    >>> cache_memory(x, old, mem_len=3, reuse_len=2)[0, :, 0].numpy().tolist()
    [9.0, 0.0, 1.0]
  """
  if not mem_len:
    return None
  if reuse_len > 0:
    layer_input = layer_input[:, :reuse_len]
  if prev_mem is not None:
    layer_input = tf.concat([tf.cast(prev_mem, layer_input.dtype), layer_input],
                            axis=1)
  memory = layer_input[:, -mem_len:]
  return tf.stop_gradient(memory) if stop_gradient else memory


def _recomputed(run_block, h, g, seed, mems=None):
  """`run_block(h, g, seed, mems)` keeping only its inputs for the backward
  pass, which runs the layer again (`RunOptions.recompute`): activation
  memory per layer drops to its input, for one more forward pass of compute.
  The memory is an input too: a gradient flowing into it (`memory_gradient`
  upstream) would be dropped if the function only captured it."""
  args = [t for t in (h, g, seed, mems) if t is not None]

  @tf.recompute_grad
  def forward(*tensors):
    it = iter(tensors)
    h_in = next(it)
    g_in = next(it) if g is not None else None
    seed_in = next(it) if seed is not None else None
    mems_in = next(it) if mems is not None else None
    h_out, g_out = run_block(h_in, g_in, seed_in, mems_in)
    return (h_out,) if g_out is None else (h_out, g_out)

  outputs = forward(*args)
  return outputs[0], (outputs[1] if len(outputs) > 1 else None)


@keras.utils.register_keras_serializable(package="xlnet_tf")
class XLNetBlock(keras.layers.Layer):
  """One layer (scope `layer_<i>`): relative attention `rel_attn`, then the
  feed-forward net `ff` applied to both streams with shared weights.
  `fast_kernels`: the fast paths of `xlnet_tf/kernels` (True) or the
  reference path."""

  def __init__(self, d_model, n_head, d_head, d_inner, ff_activation,
               dropout=0.0, dropatt=0.0, kernel_initializer="glorot_uniform",
               fast_kernels=True, **kwargs):
    super().__init__(**kwargs)
    self._args = dict(d_model=d_model, n_head=n_head, d_head=d_head,
                      d_inner=d_inner, ff_activation=ff_activation,
                      dropout=dropout, dropatt=dropatt,
                      fast_kernels=fast_kernels)
    self.fast_kernels = fast_kernels
    self.kernel_initializer = keras.initializers.get(kernel_initializer)
    self.rel_attn = RelativeAttention(
        d_model, n_head, d_head, dropout, dropatt, self.kernel_initializer,
        fast_kernels, name="rel_attn", dtype=self.dtype_policy)
    self.ff = PositionwiseFFN(
        d_model, d_inner, ff_activation, dropout, self.kernel_initializer,
        fast_kernels, name="ff", dtype=self.dtype_policy)

  def build(self, input_shape=None):
    build_once(self.rel_attn, self.ff)
    super().build(input_shape)

  @unconverted
  def call(self, h, pos_enc, biases, g=None, mems=None, seg_mat=None,
           content_mask=None, query_mask=None, target_mapping=None,
           output_positions=None, training=False, seed=None):
    """`output_positions`: `[B, P]` int32, where the content stream is
    computed (`h` out is `[B, P, D]`), or None for all L. `seed`: int32 `[2]`
    making this layer's dropout masks a function of it (replayable for
    recomputation), or None for stateful dropout."""
    h, g = self.rel_attn(h, pos_enc, biases, g=g, mems=mems, seg_mat=seg_mat,
                         content_mask=content_mask, query_mask=query_mask,
                         target_mapping=target_mapping,
                         output_positions=output_positions,
                         training=training, seed=sub_seed(seed, 0))
    if g is None:
      return self.ff(h, training=training, seed=sub_seed(seed, 1)), None
    if not self.fast_kernels:
      return (self.ff(h, training=training, seed=sub_seed(seed, 1)),
              self.ff(g, training=training, seed=sub_seed(seed, 2)))
    # Both streams through the shared FFN as one batch of rows.
    out = self.ff(tf.concat([h, g], axis=1), training=training,
                  seed=sub_seed(seed, 1))
    return tf.split(out, [tf.shape(h)[1], -1], axis=1)

  def original_weights(self) -> dict:
    weights = {f"rel_attn/{k}": v
               for k, v in self.rel_attn.original_weights().items()}
    weights.update({f"ff/{k}": v
                    for k, v in self.ff.original_weights().items()})
    return weights

  def get_config(self):
    config = super().get_config()
    config.update(self._args)
    config["kernel_initializer"] = keras.initializers.serialize(
        self.kernel_initializer)
    return config


@keras.utils.register_keras_serializable(package="xlnet_tf")
class XLNetModel(keras.layers.Layer):
  """The XLNet encoder (the original's `model/transformer` scope).
  `options.fast_kernels` picks the layers' path: the fast kernels
  (`xlnet_tf/kernels`) or the reference math (`xlnet_tf/layers`).

  Example:
    >>> cfg = XLNetConfig(n_layer=1, d_model=8, n_head=2, d_head=4,
    ...                   d_inner=16, n_token=10)
    >>> model = XLNetModel(cfg, RunOptions(mem_len=3))
    >>> out = model(tf.constant([[5, 6, 7, 4, 3]]))
    >>> out["sequence_output"].shape, out["new_mems"][0].shape
    (TensorShape([1, 5, 8]), TensorShape([1, 3, 8]))
  """

  ORIGINAL_SCOPE = "model/transformer"

  def __init__(self, config: XLNetConfig, options: Optional[RunOptions] = None,
               **kwargs):
    options = options or RunOptions()
    kwargs.setdefault("name", "transformer")
    kwargs.setdefault("dtype", dtype_policy(options))
    super().__init__(**kwargs)
    self.config = config
    self.options = options
    self.initializer = get_initializer(options)
    self.blocks = [
        XLNetBlock(config.d_model, config.n_head, config.d_head,
                   config.d_inner, config.ff_activation, options.dropout,
                   options.dropatt, self.initializer, options.fast_kernels,
                   name=f"layer_{i}",
                   dtype=self.dtype_policy)
        for i in range(config.n_layer)
    ]
    self.position_encoding = RelativePositionEncoding(
        config.d_model, options.attn_type, options.clamp_len, options.bi_data)
    self.dropout = SeededDropout(options.dropout, options.fast_kernels,
                                 dtype=self.dtype_policy)

  def build(self, input_shape=None):
    cfg = self.config
    bias_shape = ([cfg.n_layer, cfg.n_head, cfg.d_head] if cfg.untie_r
                  else [cfg.n_head, cfg.d_head])
    self.word_embedding = self.add_weight(
        "word_embedding/lookup_table", shape=[cfg.n_token, cfg.d_model],
        initializer=fresh(self.initializer))
    # The original gives mask_emb no initializer: TF1's default, Glorot.
    self.mask_emb = self.add_weight(
        "mask_emb/mask_emb", shape=[1, 1, cfg.d_model],
        initializer="glorot_uniform")
    self.r_w_bias = self.add_weight("r_w_bias", shape=bias_shape,
                                    initializer=fresh(self.initializer))
    self.r_r_bias = self.add_weight("r_r_bias", shape=bias_shape,
                                    initializer=fresh(self.initializer))
    self.r_s_bias = self.add_weight("r_s_bias", shape=bias_shape,
                                    initializer=fresh(self.initializer))
    self.seg_embed = self.add_weight(
        "seg_embed", shape=[cfg.n_layer, 2, cfg.n_head, cfg.d_head],
        initializer=fresh(self.initializer))
    build_once(*self.blocks)
    super().build(input_shape)

  @property
  def embedding_table(self) -> tf.Variable:
    """`[n_token, D]`, shared with the tied LM head."""
    return self.word_embedding

  def _layer_biases(self, i: int, with_segments: bool):
    pick = (lambda b: b[i]) if self.config.untie_r else (lambda b: b)
    return (pick(self.r_w_bias), pick(self.r_r_bias),
            pick(self.r_s_bias) if with_segments else None,
            self.seg_embed[i] if with_segments else None)

  @unconverted
  def call(self, input_ids, segment_ids=None, input_mask=None, mems=None,
           mems_mask=None, perm_mask=None, target_mapping=None, input_q=None,
           output_positions=None, training=False, memory_gradient=False,
           mem_len=None, reuse_len=None, return_hidden_states=False):
    """`output_positions`: `[B, P]` int32; the last layer's content stream
    is computed only there and `sequence_output` is `[B, P, D]` (what a
    model that reads a few positions needs); None for all L.
    `mems_mask`: `[B, M]` float, 1 = memory nobody may attend to (needs
    `mems`). `memory_gradient`: True leaves `new_mems` differentiable, so a
    later segment's loss reaches this one (back-propagation through
    segments); False stops it. `mem_len` / `reuse_len`: this call's memory
    settings (default: the options'). `return_hidden_states`: also return
    every layer's content states (not with `output_positions`)."""
    opts = self.options
    mem_len = opts.mem_len if mem_len is None else mem_len
    reuse_len = opts.reuse_len if reuse_len is None else reuse_len
    if return_hidden_states and output_positions is not None:
      raise ValueError("return_hidden_states: not with output_positions (the "
                       "last layer then computes only some positions)")
    dtype = self.compute_dtype
    input_ids = tf.convert_to_tensor(input_ids)
    batch = tf.shape(input_ids)[0]
    qlen = tf.shape(input_ids)[1]
    if mems is not None and len(mems) != self.config.n_layer:
      raise ValueError(f"mems: expected {self.config.n_layer} tensors (one per "
                       f"layer), got {len(mems)}")
    if mems_mask is not None and mems is None:
      raise ValueError("mems_mask: given without mems")
    mlen = tf.shape(mems[0])[1] if mems is not None else 0
    klen = mlen + qlen

    content_mask, query_mask = attention_masks(
        qlen, mlen, opts.attn_type, opts.same_length, input_mask, perm_mask,
        mems_mask)

    # One seed per call, every dropout mask of the call derived from it
    # (stateless): a layer recomputed in the backward pass replays its masks.
    # In a Trainer step it is the step's (a resumed run drops what the
    # uninterrupted one did); elsewhere it is drawn at random.
    seed = None
    if training and (opts.dropout > 0 or opts.dropatt > 0):
      seed = next_seed()
      if seed is None:
        seed = tf.random.uniform([2], maxval=2**31 - 1, dtype=tf.int32)

    word_emb_k = tf.cast(tf.gather(self.word_embedding, input_ids), dtype)
    h = self.dropout(word_emb_k, training=training,
                     seed=sub_seed(seed, _EMBEDDING_SITE))
    g = None
    if input_q is not None:
      mask_emb = tf.cast(self.mask_emb, dtype)
      if target_mapping is not None:
        num_predict = tf.shape(target_mapping)[1]
        word_emb_q = tf.tile(mask_emb, [batch, num_predict, 1])
      else:
        inp_q_ext = tf.cast(input_q, dtype)[:, :, None]
        word_emb_q = inp_q_ext * mask_emb + (1 - inp_q_ext) * word_emb_k
      g = self.dropout(word_emb_q, training=training,
                       seed=sub_seed(seed, _QUERY_SITE))

    seg_mat = None if segment_ids is None else segment_matrix(segment_ids, mlen)

    pos_enc = self.position_encoding(qlen, klen, batch)
    if training and opts.dropout > 0 and len(pos_enc.shape) == 2:
      # The original drops out a per-example copy of the encoding.
      pos_enc = tf.tile(pos_enc[None], [batch, 1, 1])
    pos_enc = self.dropout(tf.cast(pos_enc, dtype), training=training,
                           seed=sub_seed(seed, _POSITION_SITE))

    new_mems: List[tf.Tensor] = []
    hidden_states: List[tf.Tensor] = []
    for i, block in enumerate(self.blocks):
      layer_mems = None if mems is None else mems[i]
      new_mems.append(cache_memory(h, layer_mems, mem_len, reuse_len,
                                   not memory_gradient))
      hidden_states.append(h)

      block_positions = (output_positions if i == len(self.blocks) - 1
                         else None)

      def run_block(h, g, seed, layer_mems, i=i, block=block,
                    block_positions=block_positions):
        # The biases are sliced from their variables in here, so a
        # recomputed layer still sends their gradients back.
        return block(h, pos_enc, self._layer_biases(i, segment_ids is not None),
                     g=g, mems=layer_mems, seg_mat=seg_mat,
                     content_mask=content_mask, query_mask=query_mask,
                     target_mapping=target_mapping,
                     output_positions=block_positions,
                     training=training, seed=seed)
      layer_seed = sub_seed(seed, i)
      if opts.recompute and training:
        h, g = _recomputed(run_block, h, g, layer_seed, layer_mems)
      else:
        h, g = run_block(h, g, layer_seed, layer_mems)

    output = self.dropout(h if g is None else g, training=training,
                          seed=sub_seed(seed, _OUTPUT_SITE))
    outputs = {"sequence_output": output,
               "new_mems": new_mems if mem_len else None}
    if return_hidden_states:
      outputs["hidden_states"] = hidden_states + [h]
    return outputs

  def original_weights(self) -> dict:
    """Original names (under `model/transformer/`) -> variables."""
    build_once(self)
    scope = self.ORIGINAL_SCOPE
    weights = {
        f"{scope}/word_embedding/lookup_table": self.word_embedding,
        f"{scope}/mask_emb/mask_emb": self.mask_emb,
        f"{scope}/r_w_bias": self.r_w_bias,
        f"{scope}/r_r_bias": self.r_r_bias,
        f"{scope}/r_s_bias": self.r_s_bias,
        f"{scope}/seg_embed": self.seg_embed,
    }
    for i, block in enumerate(self.blocks):
      for name, var in block.original_weights().items():
        weights[f"{scope}/layer_{i}/{name}"] = var
    return weights

  def get_config(self):
    config = super().get_config()
    config.pop("dtype", None)
    config.update(config=self.config.to_dict(), options=self.options.to_dict())
    return config

  @classmethod
  def from_config(cls, config):
    config = dict(config)
    xlnet_config = XLNetConfig.from_dict(config.pop("config"))
    options = RunOptions.from_dict(config.pop("options"))
    config.pop("trainable", None)
    return cls(xlnet_config, options, **config)
