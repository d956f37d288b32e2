"""Retrievers: BM25, dense and hybrid behind one `search(questions, k)` interface, over any store of passages
(odqa.core.protocols.SearchBackend); `retriever.registry` chooses and builds them, `retriever.settings` holds
their settings; what makes the retriever's models is in `retriever.training`. Importing this package loads neither
FAISS, Arrow nor the Elasticsearch client."""
