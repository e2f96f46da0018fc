"""Batch prediction on Apache Beam over this project's exports
(`run_batch_predict.py`): `job` (what to run, checked), `pipeline` (the
Beam graph), `handler` (RunInference's model handler), `shards` (the
output files) and `run` (the driver). The per-task parts are each task's
`batch.py` (`xlnet_tf/tasks/batch.py`)."""
