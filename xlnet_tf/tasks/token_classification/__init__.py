"""Token classification, named entities (`run_ner.py`).

  model     XLNetForTokenClassification, token_classification_loss,
            TokenClassificationTask
  serving   export_token_classifier (raw text in, tags and entities with
            character offsets out)
  workflow  NerOptions, NerWorkflow (labels, windows, predictions)
  metrics   conlleval's scores (through seqeval), the majority baseline
  spec      SPEC (`registry.py`)

Data side: `data_utils/ner/`.
"""
