"""The errors `python -m astra_verl.models` reports as one line and exit status 2 (torch-free, so
the command can name them before a model module, which imports torch, is loaded). They are
`UserError`s: the shared runner prints them as one line."""

from astra_foundation.errors import UserError


class BuildError(UserError, RuntimeError):
    """The weights could not be got, checked or converted; the message says what to do."""


class MissingExtraError(BuildError):
    """A package the conversion needs is not installed; the message says what to install."""
