"""Shared, kfp-free library used by every component runtime."""
