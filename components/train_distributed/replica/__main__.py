"""`python -m kfdist.components.train_distributed.replica`: see `main`."""

import sys

from kfdist.components.train_distributed.replica.main import main

sys.exit(main())
