"""What the cluster modules share: the errors they raise (each message says what to do), and
two helpers for readable output: the tail of a log, and Ray's loggers quieted for a while."""

from __future__ import annotations

import contextlib
import logging


class ClusterError(RuntimeError):
    """A cluster or job problem; the message says what to do."""


class ClusterConfigError(ClusterError, ValueError):
    """A cluster YAML that Ray's launcher would refuse, or whose versions do not match."""


class JobFailedError(ClusterError):
    """A Ray job ended FAILED or STOPPED; `.logs_tail` holds the end of its output."""

    def __init__(self, message: str, job_id: str, status: str, logs_tail: str):
        super().__init__(message)
        self.job_id, self.status, self.logs_tail = job_id, status, logs_tail


class JobTimeoutError(ClusterError, TimeoutError):
    """A Ray job did not finish within the time given; it may still be running."""


def tail(text: str, lines: int = 30) -> str:
    """The last `lines` lines of `text` (what an error message quotes from a log)."""
    return "\n".join(text.rstrip().splitlines()[-lines:])


@contextlib.contextmanager
def loggers_at(level: int, *names: str):
    """Raise these loggers to `level` for the duration (INFO chatter hidden, errors kept)."""
    loggers = [logging.getLogger(name) for name in names]
    before = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(level)
    try:
        yield
    finally:
        for logger, old in zip(loggers, before, strict=True):
            logger.setLevel(old)
