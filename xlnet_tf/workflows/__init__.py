"""Fine-tuning workflows (train / evaluate / predict / export) that the entry
scripts drive with an options object; shared pieces in `common.py`."""
