"""Adapter: HuggingFace's PyTorch XLNet (`transformers`) in a benchmark
mode, trained as HF's Trainer does (torch Adam, `clip_grad_norm_` to 1);
`compile` runs it under `torch.compile`."""

from __future__ import annotations

import torch
import transformers

from bench_common import MODES, SIZES

SOURCE = transformers.__file__


def _model_and_kwargs(size: str, mode: str):
  """The HF model of `mode` and the keyword arguments of its call."""
  m, s = MODES[mode], SIZES[size]
  cfg = transformers.XLNetConfig(
      vocab_size=s["n_token"], d_model=s["d_model"], n_layer=s["n_layer"],
      n_head=s["n_head"], d_inner=s["d_inner"], ff_activation="gelu_new",
      untie_r=True, num_labels=2, mem_len=m.get("mem"),
      reuse_len=m.get("reuse"), bi_data=mode == "pretrain")
  b, l = m["batch"], m["seq"]
  ids = torch.randint(10, s["n_token"], (b, l))
  if mode != "pretrain":
    return (transformers.XLNetForSequenceClassification(cfg), ids,
            dict(labels=torch.zeros(b, dtype=torch.long)))
  p = m["num_predict"]
  tm = torch.zeros(b, p, l)
  for k in range(p):
    tm[:, k, k * 3] = 1
  return transformers.XLNetLMHeadModel(cfg), ids, dict(
      perm_mask=torch.randint(0, 2, (b, l, l)).float(), target_mapping=tm,
      labels=ids[:, :p].contiguous(),
      mems=[torch.zeros(m["mem"], b, s["d_model"])] * s["n_layer"])


def make_step(args, mode: str):
  """A callable running one step of `mode`."""
  torch.set_num_threads(args.threads)
  model, ids, kwargs = _model_and_kwargs(args.size, mode)
  if args.compile:
    model = torch.compile(model)
  opt = torch.optim.Adam(model.parameters(), lr=1e-5)
  if not MODES[mode]["train"]:
    model.eval()

    def infer():
      with torch.no_grad():
        model(ids)
    return infer
  model.train()

  def step():
    opt.zero_grad()
    model(ids, **kwargs).loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # as HF's Trainer
    opt.step()
  return step
