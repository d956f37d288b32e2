"""Retrievers: dense dual encoder, BM25 and hybrid fusion behind one `search(questions, k)` interface."""
