"""User-facing errors: the CLI prints the message on one line and exits with status 2, no traceback."""


class OdqaError(Exception):
    """A problem with the user's input or setup. The message names the problem and the fix."""


class DataFormatError(OdqaError):
    """A corpus, question or training file that cannot be read."""


class IndexMismatchError(OdqaError):
    """An index that does not belong to this corpus, encoder or backend."""
