"""The frozen entity encoder's input. ELQ trains its entity encoder separately; here it is an off-the-shelf
sentence encoder (`odqa.core.encoder.TextEncoder`: mean pooling, L2-normalised) over `title [SEP] description`."""

from __future__ import annotations


def entity_text(title: str, description: str) -> str:
    return f"{title} [SEP] {description}" if description else title
