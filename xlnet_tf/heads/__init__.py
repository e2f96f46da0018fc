"""Heads on top of the encoder: LM, sequence summary, logits, SQuAD."""

from xlnet_tf.heads.lm import LMHead
from xlnet_tf.heads.logits import LogitHead
from xlnet_tf.heads.squad import SquadHead
from xlnet_tf.heads.summary import SUMMARY_TYPES, SequenceSummary

__all__ = ["LMHead", "LogitHead", "SquadHead", "SequenceSummary",
           "SUMMARY_TYPES"]
