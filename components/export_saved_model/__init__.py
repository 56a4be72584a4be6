"""The `export_saved_model` component: KFP interface in component.py, runtime beside it."""
