"""`odqa serve`: the pipeline behind HTTP (a JSON API and one page for people), odqa.serve.app."""
