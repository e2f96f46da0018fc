"""Weights are created from the config alone, so any layer can be built
before it sees data (checkpoint loading relies on it)."""


def build_once(*layers) -> None:
  """Builds each layer that is not built yet; building twice would create a
  second set of variables."""
  for layer in layers:
    if not layer.built:
      layer.build(None)
