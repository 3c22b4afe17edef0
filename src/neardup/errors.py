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
