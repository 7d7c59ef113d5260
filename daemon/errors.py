"""The error hierarchy. The CLI maps each class to its exit code in one place (cli.main)."""

from __future__ import annotations


class MemorydError(Exception):
    """Base class. `exit_code` is what the CLI exits with."""

    exit_code = 1


class OperationFailed(MemorydError):
    """The operation was valid but could not complete (I/O, storage, a conflicting writer)."""

    exit_code = 1


class UsageError(MemorydError):
    """Bad input: a flag, a selector, a config key, an id. Nothing was changed."""

    exit_code = 2


class ConfigError(UsageError):
    """The configuration is invalid; the message names the key or file."""


class RefusedError(MemorydError):
    """Refused by policy: a legal hold, or a lock that could not be had in time. Nothing was changed."""

    exit_code = 3


class LockTimeout(RefusedError):
    """The workspace mutation lock was held by another writer for longer than the wait bound."""


class LockLost(OperationFailed):
    """The lease expired or was taken over while we held it; our writes were fenced off."""


class FencedOut(OperationFailed):
    """A write carried a fence token older than one the store has already seen."""


class WriteConflict(OperationFailed):
    """A file changed between the read and the commit (optimistic concurrency)."""


class SourceChanged(OperationFailed):
    """A source changed (or a session was forgotten) while derived data was being prepared."""


class JobRecordError(OperationFailed):
    """A job record in Redis that cannot be run (not UTF-8, not a time, unreadable): it fails alone."""


class JobPayloadError(UsageError):
    """A request (CLI flags, a client call or a job's payload) does not match its operation's
    request model; nothing ran. The name is the one other tools see in a failed job's result."""


class AgentNotServed(UsageError):
    """The job names an agent this host does not own."""


def exit_code_of(error_class: str) -> int:
    """The exit code of an error class named in a failed job's result (`{"error": <class>}`);
    1 for a class that is not ours (arq's, Python's)."""
    pending: list[type[MemorydError]] = [MemorydError]
    while pending:
        cls = pending.pop()
        if cls.__name__ == error_class:
            return cls.exit_code
        pending.extend(cls.__subclasses__())
    return 1
