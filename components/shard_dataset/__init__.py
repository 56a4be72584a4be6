"""The `shard_dataset` component: KFP interface in component.py, runtime beside it."""
