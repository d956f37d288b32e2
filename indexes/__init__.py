"""Search backends shared by retriever and linker: BM25 text index, FAISS vector index, Elasticsearch."""
