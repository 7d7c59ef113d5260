"""systemd's notify protocol: a datagram of `KEY=value` lines to $NOTIFY_SOCKET.

No library needed: READY=1, STATUS=…, WATCHDOG=1, STOPPING=1 and EXTEND_TIMEOUT_USEC=… are
each one `sendto`. A socket path starting with '@' is in the abstract namespace. Without
$NOTIFY_SOCKET (not started by systemd) every call is a no-op, so the service code never
has to ask whether it runs under systemd.

The socket never blocks: notifications are sent from the event loop, and a datagram socket
whose receiver has stopped reading (its queue is full, net.unix.max_dgram_qlen, often 10
datagrams) would otherwise stop the whole daemon in `sendto` — its heartbeat, lease renewals
and jobs with it. A notification the receiver has no room for is dropped (STATUS= is resent at
every heartbeat), said once when the dropping starts and once when it ends.
"""

from __future__ import annotations

import logging
import os
import socket

log = logging.getLogger("memoryd.sdnotify")


def _address(raw: str) -> str | bytes:
    # '@name' is Linux's abstract namespace: a leading NUL byte instead of a filesystem path.
    return b"\0" + raw[1:].encode() if raw.startswith("@") else raw


class Notifier:
    def __init__(self, socket_path: str | None = None):
        self.path = socket_path if socket_path is not None else os.environ.get("NOTIFY_SOCKET") or None
        self._sock: socket.socket | None = None
        self.dropped = 0  # notifications dropped since the receiver last had room
        if self.path:
            self._sock = socket.socket(
                socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC | socket.SOCK_NONBLOCK
            )

    @property
    def enabled(self) -> bool:
        return self._sock is not None

    def send(self, *lines: str) -> bool:
        """Send one notification without waiting; False (logged) if it was not delivered."""
        if self._sock is None or self.path is None:
            return False
        try:
            self._sock.sendto("\n".join(lines).encode(), _address(self.path))
        except BlockingIOError:
            if not self.dropped:
                log.warning(
                    "sd_notify to %s: the receiver is not reading (its queue is full); "
                    "notifications are dropped until it reads again",
                    self.path,
                )
            self.dropped += 1
            return False
        except OSError as exc:
            # A vanished notify socket must never take the service down.
            log.warning("sd_notify to %s failed: %s", self.path, exc)
            return False
        if self.dropped:
            log.info("sd_notify to %s: delivered again after %d dropped", self.path, self.dropped)
            self.dropped = 0
        return True

    def ready(self, status: str) -> bool:
        return self.send("READY=1", f"STATUS={status}", f"MAINPID={os.getpid()}")

    def status(self, status: str) -> bool:
        return self.send(f"STATUS={status}")

    def watchdog(self) -> bool:
        return self.send("WATCHDOG=1")

    def stopping(self, status: str, extend_s: float) -> bool:
        # EXTEND_TIMEOUT_USEC asks systemd to wait this much longer before SIGKILL while we drain.
        return self.send("STOPPING=1", f"STATUS={status}", f"EXTEND_TIMEOUT_USEC={int(extend_s * 1_000_000)}")

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None


def watchdog_interval_s() -> float | None:
    """Half of $WATCHDOG_USEC (systemd's advice), or None when no watchdog is configured for us."""
    usec = os.environ.get("WATCHDOG_USEC")
    pid = os.environ.get("WATCHDOG_PID")
    if not usec or (pid and pid != str(os.getpid())):
        return None
    try:
        value = int(usec)
    except ValueError:
        return None
    return value / 2_000_000 if value > 0 else None
