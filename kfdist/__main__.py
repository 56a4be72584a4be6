"""Allows `python -m kfdist`."""

from kfdist.cli import main

raise SystemExit(main())
