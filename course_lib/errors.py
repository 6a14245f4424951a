"""One-line error messages: what every command and notebook shows instead of a traceback."""

from __future__ import annotations


def first_line(err: BaseException) -> str:
    """`Type: first line of the message` (just the type's name for an empty message)."""
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0]}" if text else type(err).__name__
