"""Types for recipe values that end up in a process's argv or environment.

A value the kernel would refuse (a NUL byte, an argument over MAX_ARG_STRLEN, an
environment key with '='), or a path the kernel would refuse (a component over NAME_MAX,
a whole over PATH_MAX), is a validation error at load time, never an exec failure later.
"""
from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator

# Linux MAX_ARG_STRLEN is 128 KiB per string; keep a margin for the rest of the command line.
MAX_ARG = 32 * 1024
# Linux NAME_MAX / PATH_MAX.
NAME_MAX = 255
PATH_MAX = 4096


def check_arg(value: str) -> str:
    if "\0" in value:
        raise ValueError("contains a NUL byte, which no command line can carry")
    if len(value.encode()) > MAX_ARG:
        raise ValueError(f"is {len(value.encode())} bytes; a command-line value may be at most {MAX_ARG}")
    return value


def check_env_key(key: str) -> str:
    if not key:
        raise ValueError("an environment variable name may not be empty")
    if "=" in key or "\0" in key:
        raise ValueError(f"environment variable name {key[:40]!r} may not contain '=' or NUL")
    return check_arg(key)


def check_path(value: str) -> str:
    """A path the kernel accepts: no NUL, components ≤ NAME_MAX bytes, whole < PATH_MAX."""
    if "\0" in value:
        raise ValueError("contains a NUL byte")
    if not value:
        raise ValueError("may not be empty")
    raw = value.encode()
    if len(raw) >= PATH_MAX:
        raise ValueError(f"is {len(raw)} bytes; a path must be shorter than {PATH_MAX}")
    for part in raw.split(b"/"):
        if len(part) > NAME_MAX:
            raise ValueError(f"has a component of {len(part)} bytes; at most {NAME_MAX} are allowed")
    return value


ArgStr = Annotated[str, AfterValidator(check_arg)]
EnvKey = Annotated[str, AfterValidator(check_env_key)]
PathStr = Annotated[str, AfterValidator(check_path)]
