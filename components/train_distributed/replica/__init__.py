"""What runs inside every training replica (a local process or a pod): the only TensorFlow importer.

One entry point, `python -m kfdist.components.train_distributed.replica`, one
exit-code policy (`job.exit_codes`).
"""
