"""docs/tf_serving.md's REST `predict` requests, answered as TF Serving
answers them. No TF Serving binary can be installed here, so its REST layer
(`tensorflow_serving/util/json_tensor.cc`) is done in Python: a request's
`instances` (rows: a value or an object of named values each) or `inputs`
(columns: named lists) become the signature's tensors, with TF Serving's
type rules (an int32 input takes JSON integers only, a float32 one any
number, a string one strings); the named signature of a tiny classifier's
real exports (features and text, laid out as run_classifier.py writes
them) is called; its outputs become `{"predictions": [one object per
example]}` for rows and `{"outputs": {name: list}}` for columns, floats
written as TF Serving writes them.

Held: every request on the page pairs with the response below it; the
response this gives has the documented response's keys, shapes and types
(numbers and labels come from the weights); the labels and classes are the
export's own, called directly on features built in Python; the page's
client snippet writes exactly the page's features request; the text
export's answer to the texts is the features export's answer to the
snippet's features. docs/serving.md's walkthrough snippets run on these
real exports too (tests/test_docs.py runs them on stand-ins)."""

import contextlib
import io
import json
import os

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  (the text export's tokenizer ops)
import tf_keras as keras

import xlnet_tf as xt
from batch_cases import TINY_CLI
from conftest import spiece_path
from data_utils.classification.features import convert_example
from data_utils.tokenization import SentencePieceTokenizer
from doc_pages import blocks, read
from xlnet_tf.export.layout import prepare_export_root, version_dir
from xlnet_tf.tasks.batch import left_padded
from xlnet_tf.tasks.classification.serving import export_classifier

PAGE = "docs/tf_serving.md"
LABELS = ["neg", "pos"]
LENGTH = 128  # --max_seq_length of the page's run
STEP = 1000
EXPORT_ROOT = os.path.join("work", "model", "saved_model")
TEXT_SIGNATURES = ("serve_text", "serve_text_pair")


# -- TF Serving's REST layer ---------------------------------------------------

class RestError(ValueError):
  """What TF Serving answers as `{"error": ...}`."""


def _value(value, dtype: tf.DType):
  """One JSON value as json_tensor.cc's AddValueToTensor takes it."""
  if dtype == tf.string:
    if not isinstance(value, str):
      raise RestError(f"JSON Value: {value!r} is not of expected type: "
                      "DT_STRING")
    return value.encode("utf-8")
  if isinstance(value, bool) or not isinstance(value, (int, float)) or (
      dtype.is_integer and not isinstance(value, int)):
    raise RestError(f"JSON Value: {value!r} is not of expected type: "
                    f"{dtype.name}")
  return value


def _tensor(value, spec: tf.TensorSpec) -> tf.Tensor:
  """A nested JSON list as one dense tensor of `spec`'s dtype."""
  def walk(v):
    return [walk(x) for x in v] if isinstance(v, list) else _value(
        v, spec.dtype)
  try:
    array = np.array(walk(value), dtype=object if spec.dtype == tf.string
                     else spec.dtype.as_numpy_dtype)
  except ValueError as e:  # ragged lists
    raise RestError(f"{spec.name}: not a dense tensor ({e})") from None
  return tf.constant(array, spec.dtype)


def request_tensors(body: dict, signature):
  """The named tensors of a predict request, and its format ("row" for
  `instances`, "columnar" for `inputs`), as FillPredictRequestFromJson
  makes them for `signature`."""
  specs = signature.structured_input_signature[1]
  if ("instances" in body) == ("inputs" in body):
    raise RestError("expecting only one of 'inputs' or 'instances'")
  if "instances" in body:
    rows = body["instances"]
    if not isinstance(rows, list) or not rows:
      raise RestError("No values in 'instances' array")
    if not isinstance(rows[0], dict):
      if len(specs) > 1:
        raise RestError("instances is a plain list, but expecting list of "
                        "objects as multiple input tensors required")
      rows = [{next(iter(specs)): row} for row in rows]
    for number, row in enumerate(rows):
      if not isinstance(row, dict) or set(row) != set(specs):
        raise RestError(f"Failed to process element: {number} of "
                        f"'instances' list: keys must be equal to: "
                        f"{','.join(sorted(specs))}")
    return {name: _tensor([row[name] for row in rows], spec)
            for name, spec in specs.items()}, "row"
  inputs = body["inputs"]
  if not isinstance(inputs, dict):
    if len(specs) > 1:
      raise RestError("inputs is a plain value/list, but expecting an "
                      "object as multiple input tensors required")
    inputs = {next(iter(specs)): inputs}
  missing = sorted(set(specs) - set(inputs))
  if missing:
    raise RestError(f"Missing named input: {missing[0]} in 'inputs' object.")
  return {name: _tensor(inputs[name], spec)
          for name, spec in specs.items()}, "columnar"


def write_decimal(value) -> str:
  """A float32 as json_tensor.cc's WriteDecimal writes it: six significant
  digits where they read back as the same float, else nine; `.0` added to
  a whole number."""
  value = np.float32(value)
  text = f"{float(value):g}"
  if np.float32(text) != value:
    text = f"{float(value):.9g}"
  if "." not in text and "e" not in text:
    text += ".0"
  return text


def _json_values(array: np.ndarray):
  if array.dtype == object:
    return np.vectorize(lambda b: b.decode("utf-8"), otypes=[object])(
        array).tolist()
  if array.dtype.kind == "f":
    return np.vectorize(lambda x: float(write_decimal(x)),
                        otypes=[object])(array).tolist()
  return array.tolist()


def rest_predict(loaded, body: dict) -> dict:
  """TF Serving's answer to a predict request `body` for the SavedModel
  `loaded` (the response JSON, parsed)."""
  name = body.get("signature_name", "serving_default")
  if name not in loaded.signatures:
    raise RestError(f"Serving signature name: \"{name}\" not found in "
                    "signature def")
  signature = loaded.signatures[name]
  tensors, form = request_tensors(body, signature)
  outputs = {k: _json_values(v.numpy()) for k, v in
             signature(**tensors).items()}
  if form == "columnar":
    return {"outputs": outputs if len(outputs) > 1 else
            next(iter(outputs.values()))}
  rows = len(next(iter(outputs.values())))
  if len(outputs) == 1:
    return {"predictions": next(iter(outputs.values()))}
  return {"predictions": [{k: v[b] for k, v in outputs.items()}
                          for b in range(rows)]}


# -- the page ------------------------------------------------------------------

def page_exchanges():
  """(request, response) of every ```json request block of the page and the
  response block after it."""
  found, request = [], None
  for lang, line, body in blocks(read(PAGE))[0]:
    if lang != "json":
      continue
    value = json.loads(body)
    if "instances" in value or "inputs" in value:
      assert request is None, f"{PAGE}:{line}: a request without a response"
      request = value
    else:
      assert request is not None, f"{PAGE}:{line}: a response to no request"
      found.append((request, value))
      request = None
  assert request is None, f"{PAGE}: the last request has no response"
  return found


def python_block() -> str:
  code = [body for lang, _, body in blocks(read(PAGE))[0] if lang == "python"]
  assert len(code) == 1, f"{PAGE}: one python block, the client's"
  return code[0]


@pytest.fixture(scope="module")
def work(shared, tmp_path_factory):
  """A tiny neg/pos classifier exported as run_classifier.py exports it:
  `work/model/saved_model/{features,text}/1000`, under a working folder."""
  keras.utils.set_random_seed(44)  # the page's numbers: one label each
  model = xt.XLNetClassifier(xt.XLNetModel(TINY_CLI, xt.RunOptions(
      init_std=0.3)), n_class=2, task_name="generic")
  model.build()
  folder = tmp_path_factory.mktemp("serving")
  root = str(folder / EXPORT_ROOT)
  prepare_export_root(root, "classifier")
  for servable in ("features", "text"):
    export_classifier(model, version_dir(root, servable, STEP), LENGTH, False,
                      labels=LABELS, sp_model_path=spiece_path(shared),
                      text_signatures=servable == "text")
  return folder


@pytest.fixture(scope="module")
def exports(work):
  return {servable: tf.saved_model.load(
      str(work / EXPORT_ROOT / servable / str(STEP)))
          for servable in ("features", "text")}


def _served_by(request: dict):
  """The exports a request can go to: the text one for raw text, both for
  features (each has the features signatures)."""
  name = request.get("signature_name", "serving_default")
  return ["text"] if name in TEXT_SIGNATURES else ["features", "text"]


def _shape(value):
  """A JSON value's structure: its keys, list lengths and leaf types."""
  if isinstance(value, dict):
    return {k: _shape(v) for k, v in value.items()}
  if isinstance(value, list):
    return [_shape(v) for v in value]
  return type(value).__name__


def _rows(response: dict):
  """A response's examples as row objects, whichever its format."""
  if "predictions" in response:
    return response["predictions"]
  outputs = response["outputs"]
  return [{k: v[b] for k, v in outputs.items()}
          for b in range(len(outputs["label"]))]


def test_the_page_shows_both_exports_and_both_formats():
  exchanges = page_exchanges()
  names = [r.get("signature_name", "serving_default") for r, _ in exchanges]
  assert "serve_text" in names
  assert any(n not in TEXT_SIGNATURES for n in names)
  assert {"instances", "inputs"} <= {k for r, _ in exchanges for k in r}


@pytest.mark.parametrize("number", range(len(page_exchanges())))
def test_a_request_answers_as_the_page_shows(exports, number):
  request, documented = page_exchanges()[number]
  for servable in _served_by(request):
    answer = rest_predict(exports[servable], request)
    assert _shape(answer) == _shape(documented), servable
  # The documented numbers are one model's: consistent with each other.
  for row in _rows(documented):
    assert row["label"] == LABELS[row["class_id"]]
    assert row["class_id"] == int(np.argmax(row["logits"]))
    logits = np.array(row["logits"], np.float64)
    np.testing.assert_allclose(
        row["probabilities"], np.exp(logits) / np.exp(logits).sum(),
        atol=1e-6)


def _full_length(request: dict, tokenizer) -> dict:
  """A request's examples as `serving_default` takes them, built here
  without the REST layer: the texts' features as run_classifier.py makes
  them, or the request's features padded on the left to all L."""
  inputs = request.get("instances") or request["inputs"]
  if request["signature_name"] in TEXT_SIGNATURES:
    texts = [t["text"] if isinstance(t, dict) else t for t in inputs]
    rows = [convert_example(tokenizer.encode_ids(t), None, LENGTH)
            for t in texts]
  else:
    if isinstance(inputs, dict):
      inputs = [{k: v[b] for k, v in inputs.items()}
                for b in range(len(inputs["input_ids"]))]
    rows = left_padded([{k: np.asarray(v) for k, v in row.items()}
                        for row in inputs], LENGTH)
    rows = [{k: v[b] for k, v in rows.items()} for b in range(len(inputs))]
  return {k: tf.constant([row[k] for row in rows],
                         tf.float32 if k == "input_mask" else tf.int32)
          for k in rows[0]}


@pytest.mark.parametrize("number", range(len(page_exchanges())))
def test_labels_are_the_export_s_own(exports, sp_tokenizer, number):
  """The REST answer's classes and labels are those of `serving_default`
  called directly on the same examples at all L, built in Python."""
  request, _ = page_exchanges()[number]
  direct = exports["features"].signatures["serving_default"](
      **_full_length(request, sp_tokenizer))
  for servable in _served_by(request):
    answer = _rows(rest_predict(exports[servable], request))
    assert [r["class_id"] for r in answer] == \
        direct["class_id"].numpy().tolist()
    assert [r["label"] for r in answer] == \
        [b.decode() for b in direct["label"].numpy()]
    np.testing.assert_allclose([r["logits"] for r in answer],
                               direct["logits"].numpy(), atol=1e-6)


def test_the_client_snippet_writes_the_page_s_request(work, monkeypatch):
  monkeypatch.chdir(work)
  exec(compile(python_block(), PAGE, "exec"), {})  # noqa: S102
  written = sorted(n for n in os.listdir(work) if n.endswith(".json"))
  assert written == ["features_request.json"]
  with open(work / written[0], encoding="utf-8") as f:
    built = json.load(f)
  assert built in [r for r, _ in page_exchanges()]


def test_the_serving_walkthrough_runs_on_real_exports(work, exports,
                                                    monkeypatch):
  """docs/serving.md's walkthrough snippets (tests/test_docs.py runs them
  on stand-ins) on the real exports: what they print is the exports'."""
  monkeypatch.chdir(work)
  text = read("docs/serving.md")
  walkthrough = text[:text.index("\n## ", text.index("## Walkthrough"))]
  out = io.StringIO()
  with contextlib.redirect_stdout(out):
    for lang, _, body in blocks(walkthrough)[0]:
      if lang == "python":
        exec(compile(body, "docs/serving.md", "exec"), {})  # noqa: S102
  texts = ["A gripping, well-acted film.", "Two hours I will not get back."]
  labels = exports["text"].signatures["serve_text"](
      text=tf.constant(texts))["label"].numpy()
  printed = out.getvalue().splitlines()
  assert printed[0].startswith(str(labels) + " [[")
  assert printed[-1] == str(labels[:1])


def test_text_and_features_answer_alike(exports):
  """The page's text request (the texts) and its features requests (the
  snippet's features of the same texts) get the same answers."""
  answers = {}
  for request, _ in page_exchanges():
    servable = _served_by(request)[0]
    answers.setdefault(servable, []).append(
        _rows(rest_predict(exports[servable], request)))
  (text,) = answers["text"]
  assert answers["features"]
  for rows in answers["features"]:
    assert [r["label"] for r in rows] == [r["label"] for r in text]
    np.testing.assert_allclose([r["logits"] for r in rows],
                               [r["logits"] for r in text], atol=1e-5)


def test_each_export_s_signatures_and_files(work, exports, shared):
  """What the serving pages say both exports hold: the features signatures
  in both, the raw-text ones in `text`; the SentencePiece model in both."""
  assert sorted(exports["features"].signatures) == [
      "serve_features", "serving_default"]
  assert sorted(exports["text"].signatures) == [
      "serve_features", "serve_text", "serve_text_pair", "serving_default"]
  with open(spiece_path(shared), "rb") as f:
    model = f.read()
  for servable in ("features", "text"):
    folder = work / EXPORT_ROOT / servable / str(STEP)
    assert sorted(os.listdir(folder)) == [
        "assets", "assets.extra", "fingerprint.pb", "saved_model.pb",
        "variables", "xlnet_tf_export.json"]
    assert (folder / "assets.extra" / "spiece.model").read_bytes() == model
    batch = json.loads((folder / "xlnet_tf_export.json").read_text())["batch"]
    assert (batch["max_seq_length"], batch["signature"], batch["labels"]) == (
        LENGTH, "serve_features", LABELS)
  assert SentencePieceTokenizer(str(
      work / EXPORT_ROOT / "text" / str(STEP) / "assets.extra" /
      "spiece.model")).vocab_size == 32000


# -- the REST layer itself -----------------------------------------------------

def test_floats_are_written_as_tf_serving_writes_them():
  assert [write_decimal(x) for x in (0.2, 1.0, 9e6, 3e-5, 1 / 3, -2.5)] == [
      "0.2", "1.0", "9e+06", "3e-05", "0.333333343", "-2.5"]


@pytest.mark.parametrize("body,error", [
    ({"instances": [{"input_ids": [1.0], "segment_ids": [0],
                     "input_mask": [0]}]},
     "JSON Value: 1.0 is not of expected type: int32"),
    ({"instances": [{"input_ids": [1], "segment_ids": [0]}]},
     "keys must be equal to: input_ids,input_mask,segment_ids"),
    ({"instances": [[1]], "inputs": {}},
     "expecting only one of 'inputs' or 'instances'"),
    ({"inputs": {"input_ids": [[1]], "segment_ids": [[0]]}},
     "Missing named input: input_mask in 'inputs' object."),
    ({"inputs": {"input_ids": [[1, 2], [3]], "segment_ids": [[0, 0], [0]],
                 "input_mask": [[0, 0], [0]]}}, "not a dense tensor"),
])
def test_requests_tf_serving_refuses_are_refused(exports, body, error):
  body = dict(body, signature_name="serve_features")
  with pytest.raises(RestError) as e:
    rest_predict(exports["features"], body)
  assert error in str(e.value)
