"""Conformance suites a component outside this repository can run against itself, as Haystack ships its
document-store tests: `reader_conformance` for a reader (odqa.core.protocols.Reader). Each suite is plain
functions that raise AssertionError naming what broke, so any test runner can call them."""
