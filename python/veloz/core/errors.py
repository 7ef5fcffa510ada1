"""The one exception the CLI turns into a single line on stderr."""


class VelozError(Exception):
    """A user-facing failure: bad input, missing privilege, missing build.

    `code` is the exit status: 2 for bad input (usage, config, names),
    1 for an operation that failed.
    """

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code
