"""Making the reader, apart from the query path: training (`train`, `train_config`), its data (`distant`
supervision, `cloze` pretraining questions, `topical` negatives) and weight averaging (`soup`). Nothing of the
query path imports these (`reader.export`, which ships a trained checkpoint, reads `train_config`)."""
