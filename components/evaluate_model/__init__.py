"""The `evaluate_model` component: KFP interface in component.py, runtime beside it."""
