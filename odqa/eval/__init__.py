"""Evaluation, the application's own layer: evaluators with one interface (`odqa.eval.evaluators`: called on a
retriever, pipeline, reader or linker, they return a dict of metrics and name their primary metric), the
metrics they compute (retrieval recall and MRR, QA and reader EM/F1, linking P/R/F1, calibration), run files
(`odqa.eval.runs`), hybrid fusion tuning (`odqa.eval.tuning`) and the linker's question sets and speed
(`odqa.eval.linking`)."""
