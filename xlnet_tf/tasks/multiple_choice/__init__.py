"""Multiple choice (`run_race.py`).

  model     XLNetForMultipleChoice, MultipleChoiceTask
  serving   export_multiple_choice
  workflow  RaceOptions, RaceWorkflow
  spec      SPEC (`registry.py`)

Data side: `data_utils/race/`.
"""
