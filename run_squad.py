"""run_squad.py: entry script (absl flags). Not implemented yet: it lands with
its own issue; the library it will drive (xlnet_tf) is usable now."""

import sys

from absl import app


def main(argv):
  del argv
  sys.stderr.write("run_squad.py: not implemented yet (see the issue tracker); "
                   "use the xlnet_tf library API meanwhile\n")
  return 2


if __name__ == "__main__":
  app.run(main)
