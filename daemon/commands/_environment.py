"""What a command checks before it touches anything: the state directory is usable, a run
without a config file says so (and refuses a default sessions root that does not exist),
and an agent named on the command line is one this host knows. Each check raises one line
that names what is wrong and what to do."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from memoryd.agents import list_agents
from memoryd.errors import ConfigError, OperationFailed, UsageError
from memoryd.ids import validate_agent_id
from memoryd.settings import Settings


def _os_error_text(exc: OSError) -> str:
    where = f": {exc.filename}" if exc.filename else ""
    return f"{exc.strerror or exc}{where}"


def state_dir_problem(state_dir: Path) -> str | None:
    """Why memoryd cannot keep its state in `state_dir`, or None. Nothing is created: the
    directory (or, while it is missing, the nearest existing ancestor, where it would be
    created) must be a directory that accepts a new file."""
    probe = state_dir
    while True:
        try:
            mode = probe.stat().st_mode
        except FileNotFoundError:
            if probe.parent == probe:
                return f"no existing ancestor of {state_dir}"
            probe = probe.parent
            continue
        except OSError as exc:
            return _os_error_text(exc)
        break
    if not stat.S_ISDIR(mode):
        return f"{os.strerror(20)}: {probe}"  # ENOTDIR: a regular file stands where a directory must
    try:
        _create_unnamed_file(probe)
    except OSError as exc:
        return _os_error_text(exc)
    return None


def _create_unnamed_file(directory: Path) -> None:
    """An unnamed temporary file (O_TMPFILE): the real answer of the file system, which also
    holds for root on a read-only mount, and leaves nothing behind. Opened directly (every
    command runs this, and the tempfile module costs more than the check); any refusal is
    asked again through tempfile, which falls back to a named file where O_TMPFILE is not
    supported and raises the error an operator is shown."""
    try:
        fd = os.open(directory, os.O_RDWR | os.O_EXCL | os.O_TMPFILE, 0o600)
    except OSError:
        import tempfile

        with tempfile.TemporaryFile(dir=directory):
            pass
        return
    os.close(fd)


def check_state_dir(settings: Settings) -> None:
    problem = state_dir_problem(settings.state_dir)
    if problem is not None:
        raise OperationFailed(
            f"state_dir {settings.state_dir} is unusable ({problem}); make it a writable directory "
            "or set state_dir in the config (MEMORYD_STATE_DIR)"
        )


def no_config_notice(settings: Settings) -> str | None:
    """What a run without a config file takes from the built-in defaults (None when the
    environment sets both paths, as a service unit may)."""
    defaulted = [
        f"{key}={getattr(settings, key)}"
        for key in ("state_dir", "sessions_root")
        if f"MEMORYD_{key.upper()}" not in os.environ
    ]
    if not defaulted:
        return None
    return (
        f"no config file; using defaults: {', '.join(defaulted)} (pass --config FILE or set MEMORYD_CONFIG)"
    )


def check_default_sessions_root(settings: Settings) -> None:
    """Without a config file, a sessions root nobody chose must exist: else every command
    would quietly report an empty host."""
    if "MEMORYD_SESSIONS_ROOT" in os.environ or settings.sessions_root.is_dir():
        return
    raise ConfigError(
        f"no config file, and the default sessions_root {settings.sessions_root} does not exist; "
        "pass --config FILE (or set MEMORYD_CONFIG) naming where the agents' sessions live"
    )


def known_agents(settings: Settings) -> list[str]:
    """Agents under sessions_root or configured, and agents whose store outlived their sessions."""
    names = set(list_agents(settings))
    try:
        with os.scandir(settings.state_dir / "agents") as entries:
            names.update(e.name for e in entries if (Path(e.path) / "memory.sqlite").exists())
    except FileNotFoundError:
        pass
    return sorted(names)


def require_known_agent(settings: Settings, agent_id: str) -> str:
    validate_agent_id(agent_id)
    known = known_agents(settings)
    if agent_id not in known:
        listed = ", ".join(known) if known else "none"
        raise UsageError(
            f"agent {agent_id!r} not found under sessions_root {settings.sessions_root} (known: {listed})"
        )
    return agent_id
