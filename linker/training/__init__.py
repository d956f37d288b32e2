"""Training the ELQ linker (`train`, `train_config`), apart from the query path; nothing of the query path imports
these."""
