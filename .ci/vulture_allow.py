# Names vulture reports unused that are used where it cannot see (.ci/run passes this file to it). Each group says
# who uses them; dead code is deleted, not listed here.
# ruff: noqa: F821, B018 (vulture's whitelist format: bare names and attributes of `_`, never executed)

# module __getattr__ and __dir__: Python calls them for the lazily loaded names of odqa and odqa.corpus
__getattr__
__dir__

# attributes set on other libraries' objects for those libraries to read: onnxruntime SessionOptions and
# FusionOptions, faiss indexes, a tokenizers Tokenizer, a transformers config, selenium and uvicorn, logging handlers
_.enable_gelu_approximation
_.use_multi_head_attention
_.intra_op_num_threads
_.inter_op_num_threads
_.graph_optimization_level
_.efConstruction
_.clustering_index
_.normalizer
_.pre_tokenizer
_.decoder
_.post_processor
_.intermediate_size
_.binary_location
_.should_exit
_.handleError

# methods and names other libraries look up by name: onnxruntime's CalibrationDataReader, http.server's request
# handlers, pytest's hooks and module marks
_.get_next
do_GET
do_HEAD
do_POST
do_PUT
do_DELETE
_.log_message
pytest_addoption
pytest_collection_modifyitems
_.pytest_terminal_summary
pytestmark

# the shell's commands, dispatched by name (getattr(self, f"show_{name}"))
_.show_entities
_.show_explain

# fields read by reflection: pydantic models' settings and the JSON bodies of the HTTP API, dataclass fields that
# name the keys a model's config file or an index manifest may hold
model_config
timings_ms
linker_enabled
api_key_required
api_key_header
do_lower_case
ef_search

# held so that the file under a loaded index's memory map stays open as long as the index
_._source

# the abstract evaluator's argument, which its implementations use
system
