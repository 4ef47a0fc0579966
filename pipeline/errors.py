"""Errors split by whether a retry can help.

A TerminalError (bad input, a refused publish) fails at once with a message
that says what to fix; a TransientError (throttling, network) is worth a
retry. The CLI maps each class to its own exit code, the DAGs to retries.
"""


class PipelineError(Exception):
    """Base of every error the pipeline raises on purpose."""

    exit_code = 1


class TerminalError(PipelineError):
    """Retrying cannot help: the input or the configuration must change."""

    exit_code = 2


class TransientError(PipelineError):
    """A retry may succeed (throttling, 5xx, a reset connection)."""

    exit_code = 75  # EX_TEMPFAIL


class InventoryError(TerminalError):
    """The inventory cannot be read: missing, corrupt, empty or of a wrong schema."""


class ConfigError(TerminalError):
    """A flag or a configuration value is wrong."""


class StorageError(TerminalError):
    """Object storage refused for a reason a retry cannot fix (no bucket, no access)."""


class PublishConflict(TerminalError):
    """Another generation was published since this run started."""

    exit_code = 3


class ShrinkRefused(TerminalError):
    """The new generation would publish far fewer URLs than the live one."""

    exit_code = 4


class TooManyRejects(TerminalError):
    """More input rows were rejected than the configured share allows."""

    exit_code = 5


class LiveStateCorrupt(TerminalError):
    """The live manifest or its snapshot is unreadable or does not match what was recorded.

    A retry cannot help and publishing over it would lose history: repair first
    (`sitemaps repair --out URI`, see the README).
    """


class InternalError(TerminalError, RuntimeError):
    """An invariant of the pipeline itself failed: a bug, not the input's fault.

    Terminal (a retry runs the same code on the same data). A RuntimeError too, so
    callers that caught the bare RuntimeError it replaces still catch it.
    """

    exit_code = 70  # EX_SOFTWARE

    def __init__(self, message: str) -> None:
        super().__init__(f"internal error (a bug in sitemap-pipeline, please report it): {message}")
