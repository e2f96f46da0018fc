"""XLNet as a language model: pretraining and the LM scripts.

  model              LMHead, XLNetPretrainer, PretrainTask (`run_pretrain.py`)
  original_export    run_pretrain's model_dir/original/ (checked, written)
  passes             two_stream_pass: every target's logits in one pass
  generation, generation_search   cached decoding: greedy, sampling, beams
  scoring            left-to-right log p(x), pseudo-log-likelihood
  infilling          filling holes
  embeddings         per-piece and pooled vectors
  loading            load_language_model from any checkpoint layout
  serving            export_language_model (generate and embed signatures)
  workflow           the LM scripts' flags, checks and loading
  spec               SPEC (`registry.py`)

Data side: `data_utils/pretraining/`, `data_utils/lm/`.
"""
