"""Commands: es-index (bulk-load an index folder or a knowledge base into Elasticsearch), es-search.

Connection settings come from the config's [elastic] section (hosts, api_key or username/password, TLS);
--hosts, --index-name and --username override it. Passwords and API keys are read from the config file or
the ODQA_ES_PASSWORD / ODQA_ES_API_KEY environment variables, never from flags (a flag would show in `ps`).
"""

from __future__ import annotations

import textwrap

from odqa.commands.common import add_command, add_config_flag, print_json_last
from odqa.commands.options import COUNT, POSITIVE_INT, add_options, config_overrides, dataclass_values
from odqa.config import ElasticConfig, RetrievalConfig
from odqa.core.optional import require
from odqa.core.terminal import printable
from odqa.indexes.elastic_bulk import BulkOptions


def register(subparsers) -> None:
    p = add_command(
        subparsers,
        "es-index",
        "Bulk-load an index folder (passages + dense vectors) or a linker KB into Elasticsearch; resumable.",
        "ODQA_ES_PASSWORD=... odqa es-index --index indexes/wiki-aa --hosts https://es:9200 "
        "--username elastic --index-name wiki-aa",
        run_es_index,
    )
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--index", help="odqa index folder built by `odqa index`")
    source.add_argument("--kb", help="linker knowledge-base folder (entities + entity vectors) instead of passages")
    _connection_flags(p)
    p.add_argument("--recreate", action="store_true", help="delete the Elasticsearch index first (else resume into it)")
    add_options(p, BulkOptions, ["chunk_size", "max_retries", "initial_backoff"], rename={"initial_backoff": "backoff"})
    p.add_argument("--analyzer", default="english", help="analyser of the text and title fields (any built-in one)")
    p.add_argument("--similarity", default="dot_product", choices=["dot_product", "cosine"])
    p.add_argument(
        "--shards",
        type=POSITIVE_INT,
        help="primary shards (default: one per ~30 GB of index, from the corpus size: indexes/elastic_capacity.py)",
    )
    p.add_argument(
        "--knn-type",
        choices=["hnsw", "int8_hnsw"],
        help="the vectors' index_options.type (default: "
        "hnsw below 1 M passages, int8_hnsw from there: a quarter of the page cache)",
    )
    p.add_argument("--replicas", type=COUNT, default=1, help="replicas (0 for a single-node cluster)")
    p.add_argument("--hnsw-m", type=POSITIVE_INT, default=16)
    p.add_argument("--ef-construction", type=POSITIVE_INT, default=100)
    p.add_argument("--no-vectors", action="store_true", help="passages only (BM25), even when the folder has vectors")
    p.add_argument("--limit", type=POSITIVE_INT, help="first N passages only")
    add_options(p, BulkOptions, ["progress", "parallel"])
    p.add_argument("--json", action="store_true", help="print the load report as one JSON object on the last line")
    add_config_flag(p)

    p = add_command(
        subparsers,
        "es-search",
        "Show the top passages for a question from an Elasticsearch index.",
        'odqa es-search --hosts http://127.0.0.1:9200 --index-name wiki-aa "who founded the Visigoth kingdom"',
        run_es_search,
    )
    p.add_argument("question", nargs="+")
    _connection_flags(p)
    add_options(
        p,
        RetrievalConfig,
        ["retriever", "fusion", "encoder", "k"],
        section="retrieval",
        help={
            "fusion": "hybrid: client-side rrf/minmax (as over an index folder) or the server's RRF retriever (es-rrf)",
            "encoder": "question encoder (empty: the one recorded in the index)",
            "k": "passages to show",
        },
    )
    add_options(p, ElasticConfig, ["num_candidates"], section="elastic")
    p.add_argument("--json", action="store_true", help="print hits as one JSON object")
    add_config_flag(p)


def _connection_flags(p) -> None:
    add_options(p, ElasticConfig, ["hosts", "index_name", "username"], section="elastic")
    p.add_argument("--insecure", action="store_true", help="skip TLS certificate verification (test clusters only)")


# es-search's index: the one the [elastic] section (and --hosts, --index-name) names
SECTION_INDEX = "es://"


def _config(args, index: str | None = None):
    from odqa.config import OdqaConfig

    return OdqaConfig.load(
        getattr(args, "config", None),
        {**config_overrides(args), "index": index, "elastic.verify_certs": False if args.insecure else None},
    )


def run_es_index(args) -> int:
    require("elasticsearch", "odqa es-index")  # the client is an extra, odqa[elastic]
    from odqa.core.errors import OdqaError
    from odqa.indexes.elastic import ElasticIndex
    from odqa.indexes.elastic_bulk import load_passages
    from odqa.indexes.elastic_connection import describe_hosts
    from odqa.linker.elastic import load_entities

    if args.chunk_size <= 0 or args.max_retries < 0:
        raise OdqaError("--chunk-size must be positive and --max-retries not negative")
    config = _config(args)
    index = ElasticIndex.open(config.elastic)
    options = BulkOptions(**dataclass_values(args, BulkOptions))
    if args.kb:
        report = load_entities(index, args.kb, recreate=args.recreate, similarity=args.similarity, options=options)
    else:
        report = load_passages(
            index,
            args.index,
            recreate=args.recreate,
            limit=args.limit,
            with_vectors=not args.no_vectors,
            analyzer=args.analyzer,
            similarity=args.similarity,
            shards=args.shards,
            replicas=args.replicas,
            hnsw_m=args.hnsw_m,
            ef_construction=args.ef_construction,
            options=options,
            knn_type=args.knn_type,
        )
    print(f"{describe_hosts(config.elastic.hosts)} index {index.name!r}: {report.summary()}")
    if args.json:
        print_json_last({"index_name": index.name, **report.to_dict()})
    return 1 if report.failed else 0


def run_es_search(args) -> int:
    require("elasticsearch", "odqa es-search")
    from odqa.retriever.registry import build_retriever, open_index

    config = _config(args, SECTION_INDEX)
    retriever = build_retriever(open_index(config.index, config), config.retrieval, config.retriever_runtime())
    question = " ".join(args.question)
    hits = retriever.search([question], config.retrieval.k)[0]
    if args.json:
        rows = []
        for i, h in enumerate(hits, 1):
            assert h.passage is not None  # search() gives each hit its passage
            rows.append({"rank": i, "score": h.score, "row": h.row, **h.passage.to_dict()})
        print_json_last({"question": question, "hits": rows})
        return 0
    for i, hit in enumerate(hits, 1):
        assert hit.passage is not None  # search() gives each hit its passage
        # the corpus's own characters: escaped, so that none of them acts on the terminal
        print(printable(f"{i:>3}. [{hit.score:.3f}] {hit.passage.title}  ({hit.passage.id})"))
        print(printable(textwrap.indent(textwrap.fill(hit.passage.text, 100), "     ")))
    return 0
