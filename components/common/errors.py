"""Errors that kfdist reports to users.

Every check on user input raises `InvalidInputError` *before* anything is
written or created, with a message that names the bad value and says what
would be valid. Components let it propagate so the step fails with that
message in its log.
"""


class KfdistError(Exception):
    """Base class of all errors kfdist raises on purpose."""


class InvalidInputError(KfdistError, ValueError):
    """A user-supplied value is invalid; the message names it and what is valid."""


class TrainingFailedError(KfdistError, RuntimeError):
    """A training job ended in failure; the message gives the reason."""


def require(condition: bool, message: str) -> None:
    """Raises `InvalidInputError(message)` unless `condition` holds.

    Args:
      condition: The check that must hold.
      message: What is wrong and what would be valid.

    Raises:
      InvalidInputError: If `condition` is false.
    """
    if not condition:
        raise InvalidInputError(message)
