"""The one error hierarchy of animus-flows.

Every message names the offending value and says how to fix it. Messages are redacted where they
leave the program (the CLI, JSON-RPC and MCP answers, the log filter, Prefect states), not here:
this module imports nothing of the project::

    AnimusError                 base of everything raised on purpose
    ├── ConfigError             a workflow file, flag or setting is wrong (CLI exit 2)
    └── StoreError              a memory store could not do what was asked (CLI exit 1)
        ├── StoreUnavailable    unreachable, crashed, corrupt or refused the request
        ├── StoreTimeout        did not answer within its deadline
        ├── WriteDenied         a write through a read-only binding or store
        ├── ConflictError       a versioned write whose item changed since it was read
        └── InvalidRequest      arguments the protocol rejects (CLI exit 2); also a ValueError
            └── InvalidScope    a scope id that is empty, too long or not a string
"""

from __future__ import annotations


class AnimusError(Exception):
    """Base class of every error animus-flows raises on purpose."""

    #: Exit code the `animus` CLI uses for this error.
    exit_code: int = 1


class ConfigError(AnimusError):
    """A workflow file, command-line flag or setting is invalid."""

    exit_code = 2


class StoreError(AnimusError):
    """A memory store failed to carry out an operation."""


class StoreUnavailable(StoreError):
    """The store cannot be reached, crashed, is corrupt, or refused the request."""


class StoreTimeout(StoreError):
    """The store did not answer within its deadline."""


class WriteDenied(StoreError):
    """A write was attempted through a read-only binding or store."""


class ConflictError(StoreError):
    """A versioned write found the item at another version than it expected (another writer
    changed it since it was read); nothing was written. Read it again and retry."""


class InvalidRequest(StoreError, ValueError):
    """The arguments of a store operation break the protocol's rules."""

    exit_code = 2


class InvalidScope(InvalidRequest):
    """A scope id is empty, too long, or not a string."""
