"""Serving exports: where an export may go, how it is laid out, and the
tools that read it. Each task's signatures stay in its
`xlnet_tf/tasks/<task>/serving.py`; this package knows no task, model or
checkpoint format (an export kind is a name, a model a `tf.Module`).

  directory.py        where an export may be written (its marker
                      `xlnet_tf_export.json`), the atomic swap into place,
                      ordinary permissions (`modes.py`); in a bucket,
                      uploaded with the marker last (`bucket.py`)
  layout.py           TF Serving's versioned layout of a fine-tuned model:
                      <export_dir>/{features,text,tflite}/<step>
  tflite.py           a features export -> TFLite flatbuffer (float32,
                      int8), and `TFLiteModel`, a runner for it
  saved_model_cli.py  `xlnet-saved-model-cli`: TF's saved_model_cli with TF
                      Text's ops registered, its arguments checked first

The package imports none of its modules here: import the one you need
(`from xlnet_tf.export.tflite import TFLiteModel`).
"""
