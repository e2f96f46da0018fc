"""An independent NumPy transcription of the original XLNet forward pass
(zihangdai/xlnet, modeling.py), in the original's TIME-MAJOR layout.

Shapes: L current length (qlen), M memory length (mlen), K = M + L keys (klen),
R rows of the positional encoding, B batch, P predictions, N heads, H head
size, D model size.

Weights come as a dict `w` from ORIGINAL variable names (e.g.
"model/transformer/layer_0/rel_attn/q/kernel") to arrays. Everything is done
in float64; dropout is off (inference). Masks are float, 1 = may NOT attend.
"""

import numpy as np

SCOPE = "model/transformer"
SUMMARY_SCOPE = "model/sequnece_summary"  # misspelled, as the original
MASK_PENALTY = 1e30
LN_EPS = 1e-12


def _f64(x):
  return None if x is None else np.asarray(x, dtype=np.float64)


def layer_norm(x, gamma, beta, eps=LN_EPS):
  """`[..., D] -> [..., D]`, normalized over the last axis."""
  mean = x.mean(-1, keepdims=True)
  var = ((x - mean) ** 2).mean(-1, keepdims=True)
  return (x - mean) / np.sqrt(var + eps) * gamma + beta


def gelu(x):
  """GELU, tanh form (the original's `gelu`)."""
  return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) *
                                  (x + 0.044715 * x ** 3)))


def relu(x):
  return np.maximum(x, 0.0)


def softmax(x, axis):
  x = x - x.max(axis=axis, keepdims=True)
  e = np.exp(x)
  return e / e.sum(axis=axis, keepdims=True)


def rel_shift(x, klen):
  """`[L, R, B, N] -> [L, klen, B, N]`, the original's reshape trick."""
  qlen, rlen = x.shape[0], x.shape[1]
  x = x.reshape(rlen, qlen, *x.shape[2:])[1:]
  return x.reshape(qlen, rlen - 1, *x.shape[2:])[:, :klen]


def create_causal_mask(qlen, mlen, same_length=False):
  """`[L, K]` 'uni' mask: memory visible, future (j > i) masked; with
  `same_length` the strictly lower triangle is added to the FIRST L columns."""
  ones = np.ones([qlen, qlen])
  strict_upper = np.triu(ones, 1)
  ret = np.concatenate([np.zeros([qlen, mlen]), strict_upper], axis=1)
  if same_length:
    strict_lower = np.tril(ones, -1)
    ret = np.concatenate([ret[:, :qlen] + strict_lower, ret[:, qlen:]], axis=1)
  return ret


def attention_masks(qlen, mlen, bsz, attn_type, same_length, input_mask,
                    perm_mask):
  """Returns `(non_tgt_mask, attn_mask)`, each `[L, K, B]` or both None.

  input_mask: `[L, B]` (1 = padding) or None.
  perm_mask: `[L, L, B]` (1 = i may not attend j) or None.
  """
  if attn_type == "uni":
    attn_mask = create_causal_mask(qlen, mlen, same_length)[:, :, None]
  elif attn_type == "bi":
    attn_mask = None
  else:
    raise ValueError(f"unknown attn_type {attn_type!r}")

  data_mask = None
  if input_mask is not None:
    data_mask = input_mask[None, :, :]  # [1, L, B]
  if perm_mask is not None:
    data_mask = perm_mask if data_mask is None else data_mask + perm_mask
  if data_mask is not None:
    mem_cols = np.zeros([data_mask.shape[0], mlen, bsz])
    data_mask = np.concatenate([mem_cols, data_mask], axis=1)
    attn_mask = data_mask if attn_mask is None else attn_mask + data_mask

  if attn_mask is None:
    return None, None
  attn_mask = (attn_mask > 0).astype(np.float64)
  eye = np.concatenate([np.zeros([qlen, mlen]), np.eye(qlen)], axis=1)
  non_tgt_mask = ((attn_mask - eye[:, :, None]) > 0).astype(np.float64)
  # Broadcast to the full [L, K, B] for clarity.
  shape = (qlen, mlen + qlen, bsz)
  return (np.broadcast_to(non_tgt_mask, shape),
          np.broadcast_to(attn_mask, shape))


def positional_encoding(qlen, klen, d_model, attn_type, clamp_len, bi_data,
                        bsz):
  """`[R, B, D]` sinusoids of the relative distances (R = klen + qlen for 'bi',
  klen + 1 for 'uni'); with `bi_data` the second half of the batch gets the
  negated distances."""
  freq_seq = np.arange(0, d_model, 2.0)
  inv_freq = 1.0 / (10000.0 ** (freq_seq / d_model))
  if attn_type == "bi":
    beg, end = klen, -qlen
  elif attn_type == "uni":
    beg, end = klen, -1
  else:
    raise ValueError(f"unknown attn_type {attn_type!r}")

  def embed(pos_seq, n):
    if clamp_len > 0:
      pos_seq = np.clip(pos_seq, -clamp_len, clamp_len)
    inp = np.einsum("i,d->id", pos_seq, inv_freq)
    emb = np.concatenate([np.sin(inp), np.cos(inp)], axis=-1)  # [R, D]
    return np.tile(emb[:, None, :], [1, n, 1])

  fwd = np.arange(beg, end, -1.0)
  if not bi_data:
    return embed(fwd, bsz)
  assert bsz % 2 == 0, "bi_data needs an even batch"
  bwd = np.arange(-beg, -end, 1.0)
  return np.concatenate([embed(fwd, bsz // 2), embed(bwd, bsz // 2)], axis=1)


def segment_matrix(seg_id, mlen):
  """`[L, B] -> [L, K, B, 2]` one-hot of "query and key segments differ";
  memory counts as segment 0."""
  bsz = seg_id.shape[1]
  cat_ids = np.concatenate([np.zeros([mlen, bsz], seg_id.dtype), seg_id], 0)
  differ = (seg_id[:, None, :] != cat_ids[None, :, :]).astype(np.int64)
  return np.eye(2)[differ]


def cache_mem(curr_out, prev_mem, mem_len, reuse_len=None):
  """New memory `[<=mem_len, B, D]` from a layer's input `[L, B, D]`."""
  if not mem_len:
    return None
  if reuse_len is not None and reuse_len > 0:
    curr_out = curr_out[:reuse_len]
  if prev_mem is not None:
    curr_out = np.concatenate([prev_mem, curr_out], axis=0)
  return curr_out[-mem_len:]


def rel_attn_core(q_head, k_head_h, v_head_h, k_head_r, seg_embed, seg_mat,
                  r_w_bias, r_r_bias, r_s_bias, attn_mask, d_head):
  """`q [I, B, N, H]`, `k, v [K, B, N, H]`, `r [R, B, N, H]` -> `[I, B, N, H]`."""
  klen = k_head_h.shape[0]
  ac = np.einsum("ibnd,jbnd->ijbn", q_head + r_w_bias, k_head_h)
  bd = np.einsum("ibnd,jbnd->ijbn", q_head + r_r_bias, k_head_r)
  bd = rel_shift(bd, klen)
  if seg_mat is None:
    ef = 0.0
  else:
    ef = np.einsum("ibnd,snd->ibns", q_head + r_s_bias, seg_embed)
    ef = np.einsum("ijbs,ibns->ijbn", seg_mat, ef)
  score = (ac + bd + ef) * (1.0 / np.sqrt(d_head))
  if attn_mask is not None:
    score = score - MASK_PENALTY * attn_mask[:, :, :, None]
  prob = softmax(score, axis=1)
  return np.einsum("ijbn,jbnd->ibnd", prob, v_head_h)


def _post_attention(w, scope, residual, attn_vec):
  out = np.einsum("ibnd,hnd->ibh", attn_vec, w[f"{scope}/o/kernel"])
  return layer_norm(out + residual, w[f"{scope}/LayerNorm/gamma"],
                    w[f"{scope}/LayerNorm/beta"])


def positionwise_ffn(w, scope, x, activation):
  """`[T, B, D] -> [T, B, D]`: LN(x + W2 act(W1 x + b1) + b2)."""
  act = {"relu": relu, "gelu": gelu}[activation]
  y = act(x @ w[f"{scope}/layer_1/kernel"] + w[f"{scope}/layer_1/bias"])
  y = y @ w[f"{scope}/layer_2/kernel"] + w[f"{scope}/layer_2/bias"]
  return layer_norm(y + x, w[f"{scope}/LayerNorm/gamma"],
                    w[f"{scope}/LayerNorm/beta"])


def transformer_xl(w, n_layer, n_head, d_head, untie_r, ff_activation, inp_k,
                   seg_id=None, input_mask=None, mems=None, perm_mask=None,
                   target_mapping=None, inp_q=None, attn_type="bi",
                   bi_data=False, clamp_len=-1, same_length=False,
                   mem_len=None, reuse_len=None):
  """The original `transformer_xl`, time-major, inference.

  Args:
    inp_k: `[L, B]` int token ids.
    seg_id: `[L, B]` int segment ids or None.
    input_mask: `[L, B]` float, 1 = padding, or None.
    mems: list of n_layer `[M, B, D]` or None.
    perm_mask: `[L, L, B]` float or None.
    target_mapping: `[P, L, B]` float or None.
    inp_q: `[L, B]` float or None (switches the query stream on).

  Returns:
    `(output, new_mems)`: output `[L, B, D]` (content stream) or the query
    stream `[P, B, D]` / `[L, B, D]`; new_mems list of `[<=mem_len, B, D]` or
    None when mem_len is None/0.
  """
  w = {k: _f64(v) for k, v in w.items()}
  inp_k = np.asarray(inp_k)
  input_mask, perm_mask = _f64(input_mask), _f64(perm_mask)
  target_mapping, inp_q = _f64(target_mapping), _f64(inp_q)
  if mems is not None:
    mems = [_f64(m) for m in mems]

  qlen, bsz = inp_k.shape
  mlen = mems[0].shape[0] if mems is not None else 0
  klen = mlen + qlen
  lookup = w[f"{SCOPE}/word_embedding/lookup_table"]
  d_model = lookup.shape[1]

  non_tgt_mask, attn_mask = attention_masks(
      qlen, mlen, bsz, attn_type, same_length, input_mask, perm_mask)

  # Word embedding and the query stream's start.
  word_emb_k = lookup[inp_k]  # [L, B, D]
  h = word_emb_k
  g = None
  if inp_q is not None:
    mask_emb = w[f"{SCOPE}/mask_emb/mask_emb"]  # [1, 1, D]
    if target_mapping is not None:
      g = np.tile(mask_emb, [target_mapping.shape[0], bsz, 1])
    else:
      q_ext = inp_q[:, :, None]
      g = q_ext * mask_emb + (1.0 - q_ext) * word_emb_k

  seg_mat = None if seg_id is None else segment_matrix(np.asarray(seg_id),
                                                       mlen)
  pos_emb = positional_encoding(qlen, klen, d_model, attn_type, clamp_len,
                                bi_data, bsz)

  def bias(name, i):
    b = w[f"{SCOPE}/{name}"]
    return b[i] if untie_r else b

  new_mems = []
  for i in range(n_layer):
    prev = None if mems is None else mems[i]
    new_mems.append(cache_mem(h, prev, mem_len, reuse_len))

    scope = f"{SCOPE}/layer_{i}/rel_attn"
    r_w_bias, r_r_bias = bias("r_w_bias", i), bias("r_r_bias", i)
    r_s_bias = seg_embed = None
    if seg_id is not None:
      r_s_bias = bias("r_s_bias", i)
      seg_embed = w[f"{SCOPE}/seg_embed"][i]

    cat = h if prev is None else np.concatenate([prev, h], axis=0)
    k_head = np.einsum("ibh,hnd->ibnd", cat, w[f"{scope}/k/kernel"])
    v_head = np.einsum("ibh,hnd->ibnd", cat, w[f"{scope}/v/kernel"])
    r_head = np.einsum("ibh,hnd->ibnd", pos_emb, w[f"{scope}/r/kernel"])

    # Content stream: sees itself (non_tgt_mask).
    q_head_h = np.einsum("ibh,hnd->ibnd", h, w[f"{scope}/q/kernel"])
    vec_h = rel_attn_core(q_head_h, k_head, v_head, r_head, seg_embed,
                          seg_mat, r_w_bias, r_r_bias, r_s_bias, non_tgt_mask,
                          d_head)
    h_out = _post_attention(w, scope, h, vec_h)

    # Query stream: same weights and keys/values, attn_mask.
    if g is not None:
      q_head_g = np.einsum("ibh,hnd->ibnd", g, w[f"{scope}/q/kernel"])
      if target_mapping is not None:
        q_head_g = np.einsum("mbnd,mlb->lbnd", q_head_g, target_mapping)
        vec_g = rel_attn_core(q_head_g, k_head, v_head, r_head, seg_embed,
                              seg_mat, r_w_bias, r_r_bias, r_s_bias,
                              attn_mask, d_head)
        vec_g = np.einsum("lbnd,mlb->mbnd", vec_g, target_mapping)
      else:
        vec_g = rel_attn_core(q_head_g, k_head, v_head, r_head, seg_embed,
                              seg_mat, r_w_bias, r_r_bias, r_s_bias,
                              attn_mask, d_head)
      g = _post_attention(w, scope, g, vec_g)
      g = positionwise_ffn(w, f"{SCOPE}/layer_{i}/ff", g, ff_activation)

    h = positionwise_ffn(w, f"{SCOPE}/layer_{i}/ff", h_out, ff_activation)

  output = h if g is None else g
  return output, (new_mems if mem_len else None)


def summarize_sequence(w, summary_type, hidden, input_mask=None, n_head=None,
                       d_head=None, use_proj=True):
  """The original `summarize_sequence`: `hidden [L, B, D] -> [B, D]`.

  input_mask: `[L, B]` float, 1 = padding (used by 'attn' only).
  """
  w = {k: _f64(v) for k, v in w.items()}
  hidden = _f64(hidden)
  if summary_type == "last":
    summary = hidden[-1]
  elif summary_type == "first":
    summary = hidden[0]
  elif summary_type == "mean":
    summary = hidden.mean(axis=0)
  elif summary_type == "attn":
    scope = f"{SUMMARY_SCOPE}/abs_attn"
    bsz = hidden.shape[1]
    query = np.tile(w[f"{SUMMARY_SCOPE}/summary_bias"][None, None],
                    [1, bsz, 1])  # [1, B, D]
    q_head = np.einsum("ibh,hnd->ibnd", query, w[f"{scope}/q/kernel"])
    k_head = np.einsum("ibh,hnd->ibnd", hidden, w[f"{scope}/k/kernel"])
    v_head = np.einsum("ibh,hnd->ibnd", hidden, w[f"{scope}/v/kernel"])
    score = np.einsum("ibnd,jbnd->ijbn", q_head, k_head) / np.sqrt(d_head)
    if input_mask is not None:
      score = score - MASK_PENALTY * _f64(input_mask)[None, :, :, None]
    prob = softmax(score, axis=1)
    attn_vec = np.einsum("ijbn,jbnd->ibnd", prob, v_head)
    out = np.einsum("ibnd,hnd->ibh", attn_vec, w[f"{scope}/o/kernel"])
    # No residual for the summary.
    out = layer_norm(out, w[f"{scope}/LayerNorm/gamma"],
                     w[f"{scope}/LayerNorm/beta"])
    summary = out[0]
  else:
    raise ValueError(f"unknown summary_type {summary_type!r}")
  if use_proj:
    summary = np.tanh(summary @ w[f"{SUMMARY_SCOPE}/summary/kernel"] +
                      w[f"{SUMMARY_SCOPE}/summary/bias"])
  return summary
