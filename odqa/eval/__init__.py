"""Evaluation: answer matching, question loaders, retrieval/reader/QA metrics."""
