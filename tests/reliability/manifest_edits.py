"""Manifests edited as a tool or an older build would leave them: what the integrity tests (tests/reliability)
hold the refusals to."""

from __future__ import annotations

import json
from pathlib import Path


def edit_manifest(path: Path, change, reseal: bool = True) -> None:
    """`change` the manifest's JSON; `reseal`: give it the digest of its new content, as a tool that rewrites
    manifests would (so that only the missing field itself can give the edit away)."""
    from odqa.indexes.manifest import content_digest

    data = json.loads(path.read_text())
    change(data)
    if reseal and "digest" in data:
        data["digest"] = content_digest(data)
    path.write_text(json.dumps(data, indent=2))


def as_format_1(index: Path) -> None:
    """Every manifest of `index` as the format-1 build wrote it: format 1, no digest of its own, parts recorded
    without block digests."""
    from odqa.indexes.integrity import describe_part

    def older(m):
        m["format_version"] = 1
        m.pop("digest", None)

    bundle = json.loads((index / "manifest.json").read_text())
    for part, record in bundle["params"]["parts"].items():
        edit_manifest(index / part / "manifest.json", older, reseal=False)
        described = describe_part(index / part, record["count"])
        for info in described["files"].values():
            info.pop("blocks")
        for sidecar in (index / part).glob("*.odqa-blocks"):
            sidecar.unlink()
        bundle["params"]["parts"][part] = described
    older(bundle)
    (index / "manifest.json").write_text(json.dumps(bundle, indent=2))
