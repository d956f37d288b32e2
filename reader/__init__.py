"""Extractive reader: span model, decoding, multi-passage aggregation, calibration; making readers: `training/`."""
