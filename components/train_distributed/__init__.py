"""The `train_distributed` component: KFP interface in component.py, runtime beside it."""
