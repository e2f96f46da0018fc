"""How a worker loads an export and runs its signatures.

`load_export(path, precision)` returns an `Engine` whose `.signatures[name]`
are called with `[B, L]` tensors and return a dict of tensors, as the
loaded SavedModel's are (same names, dtypes and shapes).

  float32   the SavedModel's own signatures, as loaded. With `xla_after`
            (the job's `--xla`), a shape called more than `xla_after` times
            runs under XLA from then on (`XlaSignature`): the signature is
            frozen on the first compile (its variables become constants of
            one graph, `convert_variables_to_constants_v2`), then each
            shape compiles once per process. Both cost tens of seconds at
            XLNet-Base on 2 cores, and XLA is faster only on long windows
            (benchmarks/README.md, issue 38), so it is off by default.
            String outputs (a classifier's `label`) are looked up outside
            XLA, which has no strings.
  bfloat16  the signature frozen once, on first use; every float32
            MatMul, BatchMatMul and Einsum of that graph computes in
            bfloat16 (its inputs cast to bfloat16, its result cast back),
            the rest in float32: outputs differ from
            float32 by bfloat16 rounding only, with float32 in and out.
            TensorFlow's own `auto_mixed_precision_onednn_bfloat16`
            grappler pass changed nothing on an AVX2 CPU (TF 2.20), so
            the rewrite is done here. Fast only on CPUs with AVX512_BF16
            or AMX (`precision.cpu_has_native_bfloat16`); elsewhere
            bfloat16 is emulated and slower than float32.
Nothing outside the engine's own functions changes (no process-wide
grappler, thread or XLA setting).
"""

from __future__ import annotations

import collections
from typing import Callable, Dict, List, Optional, Sequence, Set

import tensorflow as tf
from tensorflow.core.framework import types_pb2
from tensorflow.python.framework.convert_to_constants import \
    convert_variables_to_constants_v2

from xlnet_tf.batch_predict.integrity import unregistered_ops
from xlnet_tf.precision import bfloat16_crash_problem

PRECISIONS = ("float32", "bfloat16")
# The ops that hold XLNet's FLOPs; elementwise ops, softmax and layer norm
# stay float32 (as Keras' mixed_bfloat16 keeps its variables and norms).
MATMUL_OPS = frozenset({"MatMul", "BatchMatMul", "BatchMatMulV2",
                        "BatchMatMulV3", "Einsum"})
_BF16, _F32 = types_pb2.DT_BFLOAT16, types_pb2.DT_FLOAT
# Calls of one input shape before it is compiled: a shape seen once or
# twice (a bucket's last, short batch) would cost more to compile than XLA
# saves; the shapes a job repeats (full batches of common lengths) pay once.
XLA_AFTER = 2
# Shapes compiled per signature and worker, at most: each compile costs
# seconds at XLNet-Base, and a job with many distinct lengths must not pay
# one per length; shapes past the budget run the SavedModel's graph.
XLA_SHAPES = 16


def _cast(graph_def, name: str, source: str, src, dst, device: str) -> None:
  node = graph_def.node.add()
  node.op, node.name, node.device = "Cast", name, device
  node.input.append(source)
  node.attr["SrcT"].type, node.attr["DstT"].type = src, dst
  node.attr["Truncate"].b = False


def bfloat16_graph(graph_def) -> tuple:
  """`(graph_def', n)`: `graph_def` (frozen: no functions) with its `n`
  float32 matmul ops (`MATMUL_OPS`) computing in bfloat16. Each such node
  `x` becomes `x/bfloat16` on bfloat16 casts of its inputs, and `x` a cast
  of that back to float32, so every consumer reads float32 as before
  (casts of constant weights are folded by grappler on first run)."""
  out = tf.compat.v1.GraphDef()
  out.versions.CopyFrom(graph_def.versions)
  out.library.CopyFrom(graph_def.library)
  changed = 0
  for node in graph_def.node:
    if node.op not in MATMUL_OPS or node.attr["T"].type != _F32:
      out.node.add().CopyFrom(node)
      continue
    changed += 1
    inner = out.node.add()
    inner.CopyFrom(node)
    inner.name = node.name + "/bfloat16"
    inner.attr["T"].type = _BF16
    for i, source in enumerate(node.input):
      if source.startswith("^"):  # a control input carries no value
        continue
      cast = f"{node.name}/bfloat16_input{i}"
      _cast(out, cast, source, _F32, _BF16, node.device)
      inner.input[i] = cast
    _cast(out, node.name, inner.name, _BF16, _F32, node.device)
  return out, changed


def _string_part(graph_def, outputs: Sequence[str]) -> tuple:
  """`(frontier, names)` of the string `outputs` (tensor names): the
  non-constant, non-string tensors they are computed from and the nodes
  in between (those producing strings, with the constants they read)."""
  nodes = {n.name: n for n in graph_def.node}
  part: Set[str] = set()
  frontier: List[str] = []
  todo = [name.split(":")[0] for name in outputs]
  while todo:
    name = todo.pop()
    if name in part:
      continue
    part.add(name)
    for source in nodes[name].input:
      if source.startswith("^"):
        continue
      op = source.split(":")[0]
      node = nodes[op]
      strings = node.op == "Const" or any(
          v.type == types_pb2.DT_STRING for k, v in node.attr.items()
          if k in ("T", "dtype", "Tparams", "out_type"))
      if strings:
        todo.append(op)
      elif source not in frontier:
        frontier.append(source if ":" in source else source + ":0")
  return frontier, part


def has_loop(signature) -> bool:
  """Whether a signature's graph runs a loop (a `While` op anywhere in
  its functions)."""
  graph_def = signature.graph.as_graph_def()
  nodes = list(graph_def.node) + [n for f in graph_def.library.function
                                  for n in f.node_def]
  return any(n.op in ("While", "StatelessWhile") for n in nodes)


def _freeze(signature, precision: str) -> tuple:
  """`(graph_def, inputs, outputs, bfloat16_ops)`: `signature` frozen (its
  variables constants of one graph), in `precision`; `inputs` and
  `outputs` its tensors (of the frozen function), in the signature's
  order."""
  frozen = convert_variables_to_constants_v2(signature)
  graph_def, changed = frozen.graph.as_graph_def(), 0
  if precision == "bfloat16":
    graph_def, changed = bfloat16_graph(graph_def)
  return graph_def, frozen.inputs, frozen.outputs, changed


def _imported(graph_def):
  """`prune` over `graph_def` imported once: `prune(inputs, outputs)`
  (tensor names) is a function of those inputs giving those outputs."""
  imported = tf.compat.v1.wrap_function(
      lambda: tf.compat.v1.import_graph_def(graph_def, name=""), [])
  find = imported.graph.as_graph_element
  return lambda inputs, outputs: imported.prune(
      [find(x) for x in inputs], [find(x) for x in outputs])


class FrozenSignature:
  """One signature of the export as a frozen graph in `precision`: called
  with the signature's keyword tensors, returns its dict of tensors."""

  def __init__(self, signature, precision: str = "float32"):
    graph_def, inputs, outputs, self.bfloat16_ops = _freeze(signature,
                                                            precision)
    self._keys = [t.name.split(":")[0] for t in inputs]
    self._structure = signature.structured_outputs
    self._call = _imported(graph_def)([t.name for t in inputs],
                                      [t.name for t in outputs])

  def __call__(self, **tensors) -> Dict[str, tf.Tensor]:
    flat = self._call(*[tensors[k] for k in self._keys])
    return tf.nest.pack_sequence_as(self._structure, flat)


class _XlaGraph:
  """A signature's numeric part compiled by XLA (one trace, one compile
  per input shape), its string outputs (a classifier's `label`) looked up
  after it, outside XLA, which has no strings."""

  def __init__(self, signature):
    graph_def, input_tensors, output_tensors, _ = _freeze(signature,
                                                          "float32")
    inputs = [t.name for t in input_tensors]
    outputs = [t.name for t in output_tensors]
    self._keys = [name.split(":")[0] for name in inputs]
    self._structure = signature.structured_outputs
    strings = [t.name for t in output_tensors if t.dtype == tf.string]
    frontier = []
    if strings:
      frontier, part = _string_part(graph_def, strings)
      for node in graph_def.node:
        if node.name in part:
          # Control edges into the lookup (the function boundary's) would
          # tie it to the model's inputs; it reads only the frontier.
          data = [x for x in node.input if not x.startswith("^")]
          del node.input[:]
          node.input.extend(data)
    prune = _imported(graph_def)
    self._outputs = outputs
    self._numeric = [o for o in outputs if o not in strings]
    self._frontier = frontier
    specs = [tf.TensorSpec.from_tensor(t) for t in input_tensors]
    self._xla = tf.function(prune(inputs, self._numeric + frontier),
                            input_signature=specs, jit_compile=True)
    self._strings = prune(frontier, strings) if strings else None

  def __call__(self, **tensors) -> Dict[str, tf.Tensor]:
    got = dict(zip(self._numeric + self._frontier,
                   self._xla(*[tensors[k] for k in self._keys])))
    if self._strings is not None:
      names = [o for o in self._outputs if o not in got]
      got.update(zip(names, self._strings(
          *[got[x] for x in self._frontier])))
    flat = [got[o] for o in self._outputs]
    return tf.nest.pack_sequence_as(self._structure, flat)


class XlaSignature:
  """A float32 signature whose input shapes called more than `xla_after`
  times run under XLA (at most `XLA_SHAPES` of them); the others run the
  SavedModel's own signature. The signature is frozen on the first
  compile, not before: a job whose shapes never repeat pays nothing."""

  def __init__(self, signature, xla_after: int):
    self.signature, self.xla_after = signature, xla_after
    self._seen = collections.Counter()
    self._compiled: Set[tuple] = set()
    self._xla: Optional[_XlaGraph] = None

  def __call__(self, **tensors) -> Dict[str, tf.Tensor]:
    shape = tuple((k, tuple(v.shape)) for k, v in sorted(tensors.items()))
    self._seen[shape] += 1
    if (self._seen[shape] > self.xla_after
        and len(self._compiled) < XLA_SHAPES):
      self._compiled.add(shape)
    if shape not in self._compiled:
      return self.signature(**tensors)
    if self._xla is None:
      self._xla = _XlaGraph(self.signature)
    return self._xla(**tensors)


class Engine:
  """A loaded export whose `.signatures[name]` run in its precision, each
  built on first use and kept: float32 the SavedModel's own signature (an
  `XlaSignature` of it with `xla_after`), bfloat16 a `FrozenSignature`."""

  def __init__(self, loaded, precision: str = "float32",
               xla_after: Optional[int] = None):
    self.loaded, self.precision, self.xla_after = loaded, precision, xla_after
    self.signatures = _Signatures(self)


class _Signatures(dict):
  def __init__(self, engine: Engine):
    super().__init__()
    self._engine = engine

  def __missing__(self, name: str) -> Callable:
    e = self._engine
    signature = e.loaded.signatures[name]
    if e.precision == "float32" and e.xla_after is None:
      self[name] = signature
    elif has_loop(signature):
      # A loop's v1 frames do not survive freezing and import: it runs as
      # the SavedModel's own graph (the job refuses bfloat16 for such
      # exports before any work: `BatchKind.bfloat16_problem`).
      if e.precision != "float32":
        raise ValueError(f"{name}: a loop of windows; {e.precision} runs "
                         "only signatures without one")
      self[name] = signature
    elif e.precision == "float32":
      self[name] = XlaSignature(signature, e.xla_after)
    else:
      self[name] = FrozenSignature(signature, e.precision)
    return self[name]


def load_export(export_path: str, precision: str = "float32",
                xla_after: Optional[int] = None) -> Engine:
  """The export at `export_path`, ready to call in `precision`
  (`PRECISIONS`). float32 runs a shape under XLA from its
  `xla_after`+1-th call on (0: always, None: never, the default; see the
  module docstring)."""
  if precision not in PRECISIONS:
    raise ValueError(f"precision {precision!r}: one of {PRECISIONS}")
  problem = bfloat16_crash_problem() if precision == "bfloat16" else None
  if problem:
    raise ValueError(f"precision 'bfloat16': {problem}")
  if unregistered_ops(export_path):
    # An export with raw-text signatures (a language model's) holds
    # tensorflow_text's ops; the features versions of fine-tuned models
    # hold none, and their workers never load it.
    import tensorflow_text  # noqa: F401  pylint: disable=import-outside-toplevel
  return Engine(tf.saved_model.load(export_path), precision, xla_after)
