"""The one error type of the CLI: a user mistake or a set-up problem, told in one sentence."""


class TitoError(Exception):
    """Raised for wrong input or a broken set-up; `main` prints the message and exits with `code`."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code
