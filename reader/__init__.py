"""Extractive reader: span model, decoding, multi-passage aggregation, training."""
