"""OpenClaw as the peer: one isolated home and state directory per copy of the agent, every
command offline (`unshare -n`, a network namespace with no interface up, and
OPENCLAW_OFFLINE=1), FTS-only memory search over memory files and sessions."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from bench.peer.generator import AGENT
from bench.peer.install import Peer, PeerUnavailable
from bench.peer.process import Measured, checked, measure

WRITER = Path(__file__).with_name("writer.mjs")


@dataclass(frozen=True, slots=True)
class OpenClawHome:
    """One copy of the peer's state: OpenClaw's state dir and the agent's workspace."""

    peer: Peer
    root: Path

    @property
    def state(self) -> Path:
        return self.root / "state"

    @property
    def workspace(self) -> Path:
        return self.root / "ws" / AGENT

    @property
    def agent_db(self) -> Path:
        return self.state / "agents" / AGENT / "agent" / "openclaw-agent.sqlite"

    def env(self) -> dict[str, str]:
        tmp = self.root / "tmp"
        return {
            "PATH": self.peer.path_env(),
            "HOME": str(self.root / "home"),
            "OPENCLAW_HOME": str(self.root / "home"),
            "OPENCLAW_STATE_DIR": str(self.state),
            "OPENCLAW_CONFIG_PATH": str(self.state / "openclaw.json"),
            "OPENCLAW_OFFLINE": "1",
            "NO_COLOR": "1",
            "TMPDIR": str(tmp),
            "NODE_COMPILE_CACHE": str(tmp / "node-compile-cache"),
        }

    def argv(self, *args: str) -> list[str]:
        return ["unshare", "-n", str(self.peer.openclaw), *args]

    def run(self, *args: str) -> Measured:
        return measure(self.argv(*args), self.env())

    def checked(self, *args: str) -> Measured:
        return checked(self.argv(*args), self.env(), what=f"openclaw {' '.join(args[:3])}")

    def copy_to(self, root: Path) -> OpenClawHome:
        """A fresh copy of this state (for a forget apply, which changes it)."""
        shutil.rmtree(root, ignore_errors=True)
        shutil.copytree(self.root, root, symlinks=True)
        other = OpenClawHome(self.peer, root)
        config = other.state / "openclaw.json"
        config.write_text(config.read_text().replace(str(self.root), str(root)))
        return other


def require_offline_sandbox() -> None:
    if shutil.which("unshare") is None:
        raise PeerUnavailable("`unshare` (util-linux) is missing: OpenClaw commands run in `unshare -n`")
    if os.geteuid() != 0:
        raise PeerUnavailable("`unshare -n` needs root here: run the peer bench as root")


def create_home(peer: Peer, root: Path) -> OpenClawHome:
    """An empty state with the agent and the offline memory configuration."""
    require_offline_sandbox()
    shutil.rmtree(root, ignore_errors=True)
    home = OpenClawHome(peer, root)
    for d in (home.state, home.workspace, root / "home", root / "tmp", root / "logs"):
        d.mkdir(parents=True)
    (home.state / "openclaw.json").write_text(
        json.dumps({"logging": {"file": str(root / "logs" / "openclaw.log")}})
    )
    home.checked("agents", "add", AGENT, "--workspace", str(home.workspace), "--non-interactive", "--json")
    home.checked("config", "set", "memory.search.provider", "none")
    home.checked("config", "set", "memory.search.sources", '["memory","sessions"]', "--strict-json")
    home.checked("config", "set", "memory.search.experimental.sessionMemory", "true", "--strict-json")
    return home


def write_sessions(home: OpenClawHome, spec: dict[str, object]) -> dict[str, int]:
    path = home.root / "tmp" / "sessions-spec.json"
    path.write_text(json.dumps(spec))
    node = str(home.peer.node_bin / "node")
    got = checked(
        ["unshare", "-n", node, str(WRITER), str(home.peer.package_dir), str(path)],
        home.env(),
        what="the session writer (OpenClaw's writers)",
    )
    path.unlink()
    counts: dict[str, int] = json.loads(got.stdout.strip().splitlines()[-1])
    return counts
