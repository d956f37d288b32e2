"""The base every package builds on: types, errors, atomic writes, device and precision, model resolution, the
text encoder, answer matching and training helpers. It imports nothing of the project (import-linter checks)."""
