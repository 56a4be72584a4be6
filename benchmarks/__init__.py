"""kfdist benchmarks: each measure is printed next to its baseline, as a ratio from one run."""
