"""What the server may tell a visitor: text for people (notices) without the server's own places. A notice written
for the command line may name a folder (the index, a reader given as a path, `$ODQA_HOME`); over HTTP such a place
says nothing useful to a visitor and tells an attacker where things are, so it becomes a neutral word."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

SERVER_PLACE = "(a folder on the server)"
# an absolute path (POSIX, home-relative or Windows) of two parts or more: what is left after the known places
_ABSOLUTE_PATH = re.compile(r"(?<![\w.~:/\\-])(?:~?/|[A-Za-z]:\\)(?:[\w.@+-]+[/\\])+[\w.@+-]*")


def server_places(locations: Iterable[str | os.PathLike | None]) -> list[str]:
    """The spellings of `locations` (an index folder, a model folder, ...) a notice may hold: as given, absolute
    and resolved. Only what is written as a path (a bare name such as `reader` names a model, not a place) and
    names something on this machine."""
    places: set[str] = set()
    for location in locations:
        written = str(location or "")
        if not written or "://" in written or not ("/" in written or os.sep in written):
            continue  # an Elasticsearch index's URL is no folder; a bare name is a model's
        path = Path(written).expanduser()
        if not path.exists():
            continue
        places.update({written, str(path), str(path.absolute()), str(path.resolve())})
    return sorted((p for p in places if p not in ("", ".", "/")), key=len, reverse=True)


def public_text(text: str, places: Sequence[str]) -> str:
    """`text` with every one of `places` (longest first, from `server_places`) and any other absolute path
    replaced by `SERVER_PLACE`."""
    for place in places:
        text = text.replace(place, SERVER_PLACE)
    return _ABSOLUTE_PATH.sub(SERVER_PLACE, text)
