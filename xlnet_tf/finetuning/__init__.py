"""The fine-tuning driver every task's workflow runs on (below the task
packages' workflows, above the task models):

  driver     FinetuneOptions, FinetuneWorkflow (preflight, train, evaluate,
             predict, export), the checks every fine-tuning run shares
  records    RecordsWorkflow: the data hooks of tasks on the classifier's
             feature records (classification, regression, RACE)
  inference  batched inference to numpy

It knows a task only as an `XLNetTask` (`xlnet_tf/tasks/base.py`) and the
hooks a workflow implements; it imports no task package.
"""
