"""Pipelines of kfdist; each has its compiled YAML beside it."""
