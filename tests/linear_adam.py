"""Optimizer settings for tests that compare weights after a few steps.

Adam's first step is `lr * g / (|g| + eps)`. With the usual small eps that is
about `lr * sign(g)`: float summation-order noise in a near-zero gradient (a
different CPU, a different reduction order across replicas) becomes a full
lr-sized difference, and a gradient off by a constant factor goes unseen. With
eps = 1 the update is about `lr * g`, so comparing weights compares gradients.
"""

LINEAR_ADAM = dict(learning_rate=1.0, adam_epsilon=1.0)
