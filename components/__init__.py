"""KFP components of kfdist: one folder each, plus the shared kfp-free library in `common`."""
