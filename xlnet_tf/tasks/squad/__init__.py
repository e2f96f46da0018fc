"""Span extraction, SQuAD 1.1 / 2.0 (`run_squad.py`).

  model     SquadHead, XLNetForQuestionAnswering, squad_loss, SquadTask
  serving   export_squad (the beam's features signature)
  workflow  SquadOptions, SquadWorkflow (answers, official metrics, files)
  spec      SPEC (`registry.py`)

Data side: `data_utils/squad/`.
"""
