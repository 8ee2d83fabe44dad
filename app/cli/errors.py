"""The CLI's one way to fail: a sentence for the user and a non-zero exit, a traceback only with ``--debug``."""


class CliError(Exception):
    """Printed as ``draftbench: <message>`` on stderr; the process exits with ``code``."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code
