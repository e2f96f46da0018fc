"""Embeds texts with a pretrained XLNet: per-piece vectors of chosen layers
(with the pieces and their character offsets) and pooled vectors.

    python run_embed.py --init_checkpoint=xlnet_cased_L-12_H-768_A-12 \
        --spiece_model_file=xlnet_cased_L-12_H-768_A-12/spiece.model \
        --input_file=glue/SST-2/dev.tsv --output_file=sst2_dev.jsonl \
        --layers=-1,-2 --pooling=last,masked_mean --max_seq_length=128

`--input_file`: one text per line, a .tsv column (`--text_column`) or a
.jsonl field. `--output_file`:
  name.jsonl     the index (one line per text: text, pieces, ids, starts,
                 ends, rows, layers) + name.pieces.npy [pieces, K, D] +
                 name.<pooling>.npy [texts, K, D]
  name.tfrecord  one tf.train.Example per text
Texts longer than `--max_seq_length` (pieces + <sep> <cls>) are read window
by window with the memory (`--mem_len`, default the window). Poolings:
last, first, mean, attn (a checkpoint fine-tuned with summary_type=attn),
masked_mean (padding excluded); see `xlnet_tf/tasks/language_model/embeddings.py`.
"""

import json

from absl import flags

from data_utils.errors import UsageError, check_positive, run_app, run_main
from data_utils.lm.embedding_files import (EmbeddingWriter, output_files,
                                           text_pieces)
from data_utils.progress import Progress
from data_utils.text_inputs import read_texts
from xlnet_tf.tasks.language_model.choices import POOLINGS, flag_choices
from xlnet_tf.tasks.language_model.embeddings import (Embedder,
                                                      check_attn_summary,
                                                      embed_pieces,
                                                      load_attn_summary)
from xlnet_tf.tasks.language_model.workflow import (check_lm_flags, check_lm_model,
                                   check_mem_len, check_output_file,
                                   define_lm_flags, load_from_flags,
                                   machine_memory)

FLAGS = flags.FLAGS


def define_flags() -> None:
  """run_embed.py's flags: the language-model ones, then its own."""
  define_lm_flags(batch_size=8)
  flags.DEFINE_string("output_file", None, "name.jsonl (+ .npy arrays beside) "
                      "or name.tfrecord.")
  flags.DEFINE_list("layers", ["-1"], "Layers whose states are written: 0 the "
                    "embeddings, n_layer (or -1) the last.")
  flags.DEFINE_list("pooling", ["masked_mean"],
                    f"Pooled vectors to write: any of {', '.join(POOLINGS)}.")
  flags.DEFINE_integer("max_seq_length", 128, "The window: pieces + 2.")
  flags.DEFINE_integer("mem_len", None, "Memory between windows of a long text "
                       "(default: max_seq_length).")
  flags.DEFINE_bool("piece_vectors", True, "Write per-piece vectors (else "
                    "pooled vectors only).")


def _settings(f):
  """The flags checked (before any model is loaded): (layers, poolings,
  output files, the model's config)."""
  check_lm_flags(f)
  if not f.input_file:
    raise UsageError("--input_file is required")
  check_positive(f.max_seq_length, "max_seq_length", minimum=2)
  if f.mem_len is not None:
    check_positive(f.mem_len, "mem_len")
  config = check_lm_model(f).config
  layers, poolings = flag_choices(f.layers, f.pooling, config.n_layer)
  poolings = list(poolings)
  if not poolings and not f.piece_vectors:
    raise UsageError("--pooling is empty and --nopiece_vectors: nothing to "
                     "write")
  if not f.output_file:
    raise UsageError("--output_file is required")
  files = output_files(f.output_file, poolings, f.piece_vectors)
  for path in files:
    check_output_file(path, "output_file", f.overwrite)
  if "attn" in poolings:
    check_attn_summary(f.init_checkpoint)
  return layers, poolings, files, config


def _run():
  f = FLAGS
  layers, poolings, files, config = _settings(f)
  texts = read_texts(f.input_file, f.text_column)
  check_mem_len(f, config, max(min(f.batch_size, len(texts)), 1),
                machine_memory())
  lm, tokenizer = load_from_flags(f, need_lm_head=False)
  summary = (load_attn_summary(f.init_checkpoint, lm.config)
             if "attn" in poolings else None)
  embedder = Embedder(lm.encoder, layers, poolings, f.max_seq_length,
                      f.mem_len, summary)
  tokenizing = Progress("tokenizing", total=len(texts), unit="texts")
  pieces = []
  for text in texts:
    pieces.append(text_pieces(tokenizer, text))
    tokenizing.update()
  progress = Progress("texts", total=len(texts))
  with EmbeddingWriter(f.output_file, [len(p.ids) for p in pieces], layers,
                       lm.config.d_model, poolings, f.piece_vectors) as out:
    for i, vectors, pooled in embed_pieces(embedder, pieces, f.batch_size,
                                           progress):
      out.add(i, pieces[i], vectors if f.piece_vectors else None, pooled)
  progress.finish()
  print(json.dumps({"texts": len(texts),
                    "pieces": sum(len(p.ids) for p in pieces),
                    "layers": list(layers), "poolings": poolings,
                    "files": files}))


def main(argv):
  del argv
  return run_main("run_embed", _run)


def main_cli() -> None:
  """The command line: `python run_embed.py`, or `xlnet-tf-embed` installed."""
  define_flags()
  run_app("run_embed", main)


if __name__ == "__main__":
  main_cli()
