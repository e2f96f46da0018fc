"""Global length buckets (xlnet_tf/batch_predict/buckets.py and the
pipeline's `GlobalBatches`): the batches the Beam steps make on the
DirectRunner, in-process and with 2 worker processes, are exactly the
one-process plan's; a hot bucket is spread over groups of bounded size;
padding stays small, and sparse buckets merge into full batches."""

import random

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.util import assert_that, equal_to

from xlnet_tf.batch_predict.buckets import bucket_of, padding_of, plan
from xlnet_tf.batch_predict.pipeline import GlobalBatches
from xlnet_tf.tasks.batch import Prepared


def _units(n, seed=0):
  """`n` units `(key, length)`, keyed as the pipeline keys them (`(row
  key, unit index, units)`): lengths from 1 to 700, most short."""
  rng = random.Random(seed)
  return [((("part-%d.txt" % (i % 3), i), 0, 1),
           min(700, int(rng.paretovariate(1.2) * 6))) for i in range(n)]


def _keyed(units):
  """As the pipeline holds units: `(key, (fields, Prepared))`."""
  return [(key, (None, Prepared(length, None))) for key, length in units]


@pytest.mark.parametrize("options", [
    [], ["--direct_num_workers=2", "--direct_running_mode=multi_processing"]],
                         ids=["in_process", "two_workers"])
def test_the_pipeline_makes_the_plans_batches(options):
  units = _units(600)
  expected = [tuple(k for k, _ in b)
              for b in plan(units, 8, 8 * 64, group_rows=50)]
  with beam.Pipeline(options=PipelineOptions(
      ["--runner=DirectRunner"] + options)) as p:
    batches = (p | beam.Create(_keyed(units))
               | GlobalBatches(8, 8 * 64, group_rows=50)
               | beam.Map(lambda b: tuple(u[0] for u in b)))
    assert_that(batches, equal_to(expected))


def test_a_hot_bucket_is_spread_over_bounded_groups():
  units = [(("a.txt", i), 20) for i in range(5000)]  # one bucket
  batches = plan(units, 32, 32 * 512, group_rows=500)
  assert sorted(k for b in batches for k, _ in b) == [k for k, _ in units]
  groups = plan(units, 10**6, 10**9, group_rows=500)
  assert len(groups) == 10
  assert max(len(g) for g in groups) < 2 * 500


def test_padding_stays_small_and_sparse_buckets_are_merged():
  units = _units(3000, seed=1)
  batches = plan(units, 32, 32 * 512)
  real, fed = padding_of([[n for _, n in b] for b in batches])
  assert (fed - real) / fed < 0.05
  # Without merging, a batch spans one bucket (its units differ by at most
  # an eighth in length), and the sparse long tail makes many small ones.
  alone = plan(units, 32, 32 * 512, min_rows=1)
  for b in alone:
    assert len({bucket_of(n) for _, n in b}) == 1
  assert len(alone) > len(batches)
  # A small input of close lengths across several buckets (96 to 111):
  # full batches.
  small = [(("a.txt", i), 96 + i % 16) for i in range(64)]
  assert len({bucket_of(n) for _, n in small}) > 1
  assert [len(b) for b in plan(small, 32, 32 * 1024)] == [32, 32]
