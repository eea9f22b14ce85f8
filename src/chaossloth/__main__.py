"""python -m chaossloth: the chaossloth command."""

import sys

from chaossloth.cli import main

if __name__ == "__main__":
    sys.exit(main())
