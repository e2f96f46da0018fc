"""Sequence classification and regression (`run_classifier.py`): GLUE,
IMDB, Yelp, your own TSV/CSV; long documents read in segments.

  model     XLNetClassifier, XLNetRegressor, their losses, ClassifierTask
  serving   export_classifier (features, raw-text and streaming signatures)
  workflow  ClassifierOptions, ClassifierWorkflow (data, metrics,
            predictions)
  metrics   the official GLUE metrics
  spec      CLASSIFICATION, REGRESSION (`registry.py`)

Data side: `data_utils/classification/`.
"""
