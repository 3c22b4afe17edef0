"""The errors neardup raises for a user's mistakes. Each message is one line that says what was
wrong and where (file and line for bad input); the command line prints it without a traceback
and exits with status 2."""


class NeardupError(Exception):
    """Base of every error meant for the user, not for a developer."""


class ConfigError(NeardupError, ValueError):
    """A parameter is wrong: the message says what was given and what is allowed."""


class InputError(NeardupError):
    """Input that cannot be read: the message names the file and, where it applies, the line or row."""


class StorageError(NeardupError):
    """An index's storage cannot be used: missing, damaged, or its server cannot be reached."""


class SkippedWarning(UserWarning):
    """Records skipped by ``on_error="skip"`` where no rejected.parquet lists them (``neardup
    signatures``): how many, and the first with its file, row and reason."""


def one_line(value, limit: int = 0) -> str:
    """``value`` (an exception, a message) as one line: white space collapsed, an exception
    without a message named by its type, at most ``limit`` characters when given (cut with
    ``...``). Credentials are not this function's business: where a message may hold a URL, the
    caller passes it through :func:`neardup.io.storage.paths.redact` too."""
    text = str(value)
    if limit and len(text) > 4 * limit:  # a huge message: not all of it split and joined
        text = text[:4 * limit]
    text = " ".join(text.split())
    if not text and isinstance(value, BaseException):
        text = type(value).__name__
    return text if not limit or len(text) <= limit else text[:limit - 3] + "..."
