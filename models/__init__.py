"""The models shipped with odqa (reader, retriever, linker), installed as the package `odqa_models` so an
installed odqa finds them without its source tree. Each folder holds its model card (README.md)."""
