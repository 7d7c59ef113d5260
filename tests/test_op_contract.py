"""An operation is its wire contract, its run and this daemon's policy (daemon/ops/op.py): what
submits a job (the client, `memoryd enqueue`, the agents' tools, the docs generator) reads the
contract only, so the policy can change without touching another tool."""

from __future__ import annotations

import ast
from pathlib import Path

from memoryd.ops.op import JobContract, JobPolicy
from memoryd.ops.registry import OPS

ROOT = Path(__file__).resolve().parents[1]
SUBMITTING_SIDE = [
    ROOT / "daemon" / "runtime" / "client.py",
    ROOT / "daemon" / "runtime" / "erasure_fanout.py",
    ROOT / "daemon" / "commands" / "_enqueue.py",
    *sorted((ROOT / "daemon" / "agents_api").glob("*.py")),
    ROOT / "tools" / "docsgen.py",
]


def test_every_op_is_a_contract_a_run_and_a_policy() -> None:
    for op in OPS:
        assert isinstance(op.contract, JobContract) and isinstance(op.policy, JobPolicy), op
        assert callable(op.run)
    assert len({op.contract.name for op in OPS}) == len(OPS)


def test_the_submitting_side_reads_no_policy() -> None:
    readers = []
    for path in SUBMITTING_SIDE:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr == "policy":
                readers.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert readers == []
