"""A SQuAD 2.0 file of three questions (one unanswerable) on one paragraph, for the reader evaluation tests."""

from __future__ import annotations

import json


def tiny_squad(path):
    ctx = "Paris is the capital of France. Lyon is a city in France."
    data = {
        "version": "v2.0",
        "data": [
            {
                "title": "France",
                "paragraphs": [
                    {
                        "context": ctx,
                        "qas": [
                            {
                                "id": "q1",
                                "question": "What is the capital of France?",
                                "is_impossible": False,
                                "answers": [{"text": "Paris", "answer_start": 0}],
                            },
                            {
                                "id": "q2",
                                "question": "Which city is in France?",
                                "is_impossible": False,
                                "answers": [{"text": "Lyon", "answer_start": ctx.index("Lyon")}],
                            },
                            {
                                "id": "q3",
                                "question": "What is the capital of Spain?",
                                "is_impossible": True,
                                "answers": [],
                            },
                        ],
                    }
                ],
            }
        ],
    }
    path.write_text(json.dumps(data))
    return path
