"""ELQ-style entity linker: knowledge base, one-pass mention detection and disambiguation; training: `training/`."""
