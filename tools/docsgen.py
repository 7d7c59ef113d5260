"""Reference docs generated from the code, so they cannot drift (`python -m tools.docsgen`).

Writes:
  config/memoryd.example.toml   every setting, with its description and default
  docs/config-reference.md      the same as a table, with each key's environment variable
  docs/schemas/<job>.payload.schema.json / <job>.result.schema.json
                                JSON Schema of each job's payload and result (the result is the
                                report the CLI prints with --json)
  docs/schemas/cli/<command>.schema.json
                                JSON Schema of what `memoryd <command> --json` prints
  docs/cli-reference.md         `memoryd --help` and every subcommand's help
  docs/errors.md                every error message raised in daemon/ and workers/, by exit code

`python -m tools.docsgen --check` exits 1 naming every file that differs (tests run the same
comparison).
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import importlib
import json
import sys
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, TypeAdapter

from memoryd.settings import SettingField, Settings, is_section, section_fields

ROOT = Path(__file__).resolve().parent.parent

# `memoryd <command> --json` -> the model of the document it prints ("list:" = a JSON array of it),
# for the commands that are not an operation's (those print the op's report: `cli_json_models`).
CLI_JSON: dict[str, str] = {
    "status": "memoryd.runtime.status:StatusReport",
    "jobs": "list:memoryd.runtime.client:JobReport",
    "demo init": "memoryd.demo:DemoReport",
    "sessions": "memoryd.ingest.report:SessionsReport",
    "checkpoints": "memoryd.ingest.report:CheckpointsReport",
    "promote": "memoryd.dreaming.report:PromoteReport",
    "reset": "memoryd.index.report:ResetReport",
    "search": "memoryd.index.search_report:SearchReport",
    "mem write": "memoryd.retention.models:WriteResult",
    "mem read": "memoryd.retention.models:ReadResult",
    "mem lineage": "memoryd.retention.models:LineageReport",
    "hold add": "memoryd.retention.models:HoldView",
    "hold release": "memoryd.retention.models:HoldReleased",
    "hold list": "memoryd.retention.models:HoldList",
    "receipts": "memoryd.retention.receipts:ReceiptList",
    "erasure": "memoryd.retention.receipts:DeploymentReceipt",
    "verify": "memoryd.retention.receipts:Verification",
}
ENQUEUED_JOB = "memoryd.runtime.client:EnqueuedJob"

# Defaults computed on the host; the example shows them commented out with where they come from.
HOST_DEFAULTS = {
    "state_dir": "$STATE_DIRECTORY (systemd), else $XDG_STATE_HOME/memoryd, else ~/.local/state/memoryd",
    "sessions_root": "~/.openclaw",
    "daemon.host_id": "this machine's hostname",
    "daemon.deployment_id": "one derived from state_dir's path",
}


@dataclass(frozen=True, slots=True)
class Key:
    path: tuple[str, ...]  # ("index", "embedding", "provider")
    type: str
    default: Any  # HOST_COMPUTED when computed on the host
    description: str

    @property
    def dotted(self) -> str:
        return ".".join(self.path)

    @property
    def env(self) -> str:
        return "MEMORYD_" + "__".join(p.upper() for p in self.path)


HOST_COMPUTED = object()  # the default of a key in HOST_DEFAULTS


def _is_model(annotation: Any) -> bool:
    return is_section(annotation)


def _type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Literal:
        return " | ".join(json.dumps(a) for a in args)
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        return " | ".join(_type_name(a) for a in args)
    if origin is list:
        return f"list[{_type_name(args[0])}]"
    if origin is dict:
        return f"table of {_type_name(args[1])}"
    if annotation is type(None):
        return "unset"
    if isinstance(annotation, type):
        return {
            "str": "string",
            "int": "integer",
            "float": "number",
            "bool": "boolean",
            "PosixPath": "path",
            "Path": "path",
        }.get(annotation.__name__, annotation.__name__)
    return str(annotation)


def _default(field: SettingField) -> Any:
    # A factory makes a fresh empty list or table, or computes a host's value (HOST_DEFAULTS).
    return field.default if field.default is not dataclasses.MISSING else field.factory()  # type: ignore[misc]


def setting_keys(model: type = Settings, prefix: tuple[str, ...] = ()) -> Iterator[Key]:
    """Every leaf setting, depth first in declaration order (scalars of a table before its sub-tables)."""
    sections: list[tuple[str, SettingField]] = []
    for name, field in section_fields(model).items():
        if _is_model(field.annotation):
            sections.append((name, field))
            continue
        default = _default(field)
        dotted = ".".join((*prefix, name))
        if dotted in HOST_DEFAULTS:
            default = HOST_COMPUTED
        yield Key((*prefix, name), _type_name(field.annotation), default, field.description or "")
    for name, field in sections:
        section = field.annotation
        assert is_section(section)
        yield from setting_keys(section, (*prefix, name))


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str | Path):
        return json.dumps(str(value))
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"no TOML form for {value!r}")


def _section_doc(model: type) -> str:
    doc = (model.__doc__ or "").strip()
    generated = model.__name__ + "("  # the docstring dataclasses write for an undocumented class
    return doc.splitlines()[0] if doc and not doc.startswith(("A base class", "!!!", generated)) else ""


def example_toml() -> str:
    out = [
        "# memoryd configuration: every setting, its default and what it does.",
        "# Generated by `python -m tools.docsgen` from daemon/settings.py; edit the code, not this file.",
        "# Pass a file with `memoryd --config PATH` or $MEMORYD_CONFIG. Every key can also be set by an",
        "# environment variable: MEMORYD_<SECTION>__<KEY>, e.g. MEMORYD_INDEX__EMBEDDING__PROVIDER=hashing.",
        "# Unknown keys are an error that names the key. Values below are the defaults; lines that start",
        "# with '# key =' are unset by default or computed on the host.",
        "",
    ]
    current: tuple[str, ...] = ()
    for key in setting_keys():
        table, name = key.path[:-1], key.path[-1]
        if table != current:
            current = table
            out += ["", f"[{'.'.join(table)}]"]
            model = _model_at(table)
            if model is not None and _section_doc(model):
                out.append(f"# {_section_doc(model)}")
        if name == "agents":
            out += _agents_example(key)
            continue
        out.append(f"# {key.description} ({key.type})")
        if key.dotted in HOST_DEFAULTS:
            out.append(f"# {name} = ...  default: {HOST_DEFAULTS[key.dotted]}")
        elif key.default is None:
            out.append(f"# {name} =")
        else:
            out.append(f"{name} = {_toml_value(key.default)}")
    return "\n".join(out) + "\n"


def _model_at(path: tuple[str, ...]) -> type | None:
    model: Any = Settings
    for part in path:
        model = section_fields(model)[part].annotation
    return model if _is_model(model) else None


def _agents_example(key: Key) -> list[str]:
    from memoryd.settings import AgentConfig

    lines = [f"# {key.description} One table per agent id, e.g.:", "# [agents.main]"]
    for name, field in section_fields(AgentConfig).items():
        default = _default(field)
        value = "(unset)" if default is None else _toml_value(default)
        lines.append(f"# {name} = {value}    # {field.description} ({_type_name(field.annotation)})")
    return lines


def config_reference() -> str:
    out = [
        "# Configuration reference",
        "",
        "Generated by `python -m tools.docsgen` from `daemon/settings.py`; a test fails if it differs.",
        "Settings come from built-in defaults, then the TOML file (`memoryd --config PATH` or",
        "`$MEMORYD_CONFIG`), then environment variables (`MEMORYD_<SECTION>__<KEY>`). Unknown keys are",
        "an error naming the key. `memoryd config check` prints the effective settings.",
        "The annotated example with every key is [`config/memoryd.example.toml`](../config/memoryd.example.toml).",
        "",
        "| key | type | default | environment variable | description |",
        "|---|---|---|---|---|",
    ]
    for key in setting_keys():
        if key.dotted in HOST_DEFAULTS:
            default = HOST_DEFAULTS[key.dotted]
        elif key.default is None:
            default = "unset"
        else:
            default = f"`{_toml_value(key.default)}`" if key.default not in ([], {}) else "empty"
        name = "agents.&lt;id&gt;.*" if key.dotted == "agents" else key.dotted
        desc = key.description
        if key.dotted == "agents":
            from memoryd.settings import AgentConfig

            desc += " Keys: " + "; ".join(
                f"`{n}` ({f.description})" for n, f in section_fields(AgentConfig).items()
            )
        out.append(
            f"| `{name}` | {key.type.replace('|', '&#124;')} | {default.replace('|', '&#124;')} | "
            f"`{key.env}` | {desc.replace('|', '&#124;')} |"
        )
    return "\n".join(out) + "\n"


def _pydantic_twin(section: type, made: dict[type, type[BaseModel]]) -> type[BaseModel]:
    """A pydantic model of a settings section (same name, fields, bounds and descriptions), for
    the JSON Schema of `config check --json`: settings themselves are plain dataclasses."""
    from pydantic import ConfigDict, Field, create_model

    if section in made:
        return made[section]

    def twin(annotation: Any) -> Any:
        if is_section(annotation):
            return _pydantic_twin(annotation, made)
        if typing.get_origin(annotation) is dict:
            key, value = typing.get_args(annotation)
            return dict[key, twin(value)]  # type: ignore[misc,valid-type]
        return annotation

    fields: dict[str, Any] = {}
    for name, f in section_fields(section).items():
        extra: dict[str, Any] = {k: v for k, v in (("gt", f.gt), ("ge", f.ge), ("le", f.le)) if v is not None}
        if f.description:
            extra["description"] = f.description
        if f.default is not dataclasses.MISSING:
            extra["default"] = f.default
        else:
            extra["default_factory"] = (
                _pydantic_twin(f.annotation, made) if is_section(f.annotation) else f.factory
            )
        default = Field(**extra)
        fields[name] = (twin(f.annotation), default)
    model = create_model(
        section.__name__,
        __config__=ConfigDict(extra="forbid", frozen=True),
        __doc__=section.__doc__
        if section.__doc__ and not section.__doc__.startswith(section.__name__ + "(")
        else None,
        **fields,
    )
    made[section] = model
    return model  # type: ignore[no-any-return]


def settings_model() -> type[BaseModel]:
    return _pydantic_twin(Settings, {})


def _resolve(ref: str) -> Any:
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)


def job_schemas(missing: list[str] | None = None) -> dict[str, str]:
    """docs/schemas/<job>.(payload|result).schema.json -> JSON text, for every operation of the
    registry (memoryd.ops.registry): its request model and its report's type.

    A job whose models cannot be imported is named in `missing` (if given) instead of raising.
    """
    from memoryd.ops.registry import OPS

    out: dict[str, str] = {}
    for op in OPS:
        try:
            payload = op.contract.request.model_json_schema(mode="validation")
            # A model or a plain report dataclass (the forget report): pydantic reads either.
            result = TypeAdapter(op.contract.result()).json_schema(mode="serialization", by_alias=True)
        except (ImportError, AttributeError, TypeError, NameError) as exc:
            if missing is None:
                raise
            missing.append(f"{op.contract.name}: {exc.__class__.__name__}: {exc}")
            continue
        for kind, schema in (("payload", payload), ("result", result)):
            schema = {
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "$id": f"memoryd/jobs/{op.contract.name}.{kind}.schema.json",
                **schema,
            }
            out[f"docs/schemas/{op.contract.name}.{kind}.schema.json"] = (
                json.dumps(schema, indent=2, sort_keys=False) + "\n"
            )
    return out


def cli_json_models() -> dict[str, tuple[Any, bool]]:
    """Every `--json` command -> (the model of what it prints, whether it prints a list of it):
    an operation's command prints its report; `enqueue <command> --json` the enqueued job (with
    --wait, the job's result: the same report)."""
    from memoryd.ops.registry import OPS

    refs: dict[str, Any] = dict(CLI_JSON)
    refs["config check"] = settings_model  # settings are dataclasses: their pydantic twin
    for op in OPS:
        if op.contract.command is not None:
            refs[op.contract.command] = op.contract.result
            refs[f"enqueue {op.contract.command}"] = ENQUEUED_JOB
    out: dict[str, tuple[Any, bool]] = {}
    for command, ref in refs.items():
        if callable(ref):
            out[command] = (ref(), False)
        else:
            out[command] = (_resolve(ref.removeprefix("list:")), ref.startswith("list:"))
    return out


def cli_json_schemas(missing: list[str] | None = None) -> dict[str, str]:
    """docs/schemas/cli/<command>.schema.json: the document each `--json` prints."""
    out: dict[str, str] = {}
    try:
        models = cli_json_models()
    except (ImportError, AttributeError) as exc:
        if missing is None:
            raise
        missing.append(f"cli: {exc.__class__.__name__}: {exc}")
        models = {}
    for command, (model, many) in models.items():
        # A model or a plain report dataclass (the search report): pydantic reads either.
        shape = list[model] if many else model  # type: ignore[valid-type]
        schema = TypeAdapter(shape).json_schema(mode="serialization", by_alias=True)
        name = command.replace(" ", "-")
        schema = {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": f"memoryd/cli/{name}.schema.json",
            "title": f"memoryd {command} --json",
            **{k: v for k, v in schema.items() if k != "title"},
        }
        out[f"docs/schemas/cli/{name}.schema.json"] = json.dumps(schema, indent=2) + "\n"
    return out


def json_commands() -> list[str]:
    """Every CLI command (path below `memoryd`) that has a --json option."""
    import click

    from memoryd.cli import cli

    found: list[str] = []

    def walk(cmd: click.Command, path: list[str], parent: click.Context | None) -> None:
        ctx = click.Context(cmd, info_name=path[-1] if path else "memoryd", parent=parent)
        if any("--json" in p.opts for p in cmd.params if isinstance(p, click.Option)):
            found.append(" ".join(path))
        if isinstance(cmd, click.Group):
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                if sub is not None:
                    walk(sub, [*path, name], ctx)

    walk(cli, [], None)
    return sorted(found)


def cli_reference() -> str:
    import click

    from memoryd.cli import cli

    out = [
        "# CLI reference",
        "",
        "Generated by `python -m tools.docsgen` from the commands' own help; a test fails if it differs.",
        "Exit codes: 0 ok, 1 operation failed, 2 usage or config error, 3 refused (legal hold, lock timeout).",
        "Every `--json` prints one JSON document, with fields in a stable order; its JSON Schema is",
        "`schemas/cli/<command>.schema.json` (e.g. [`forget`](schemas/cli/forget.schema.json)).",
        "",
    ]

    def walk(cmd: click.Command, path: list[str], parent: click.Context | None) -> None:
        # Child contexts inherit the root's settings (-h, width), as they do when the CLI runs.
        if parent is None:
            ctx = click.Context(cmd, info_name=path[-1], terminal_width=100, **cmd.context_settings)
        else:
            ctx = click.Context(cmd, info_name=path[-1], parent=parent)
        out.extend([f"## `{' '.join(path)}`", "", "```text", cmd.get_help(ctx).rstrip(), "```", ""])
        if isinstance(cmd, click.Group):
            for name in sorted(cmd.list_commands(ctx)):
                sub = cmd.get_command(ctx, name)
                if sub is not None and not sub.hidden:
                    walk(sub, [*path, name], ctx)

    walk(cli, ["memoryd"], None)
    return "\n".join(out).rstrip() + "\n"


@dataclass(frozen=True, slots=True)
class RaiseSite:
    error: str  # class name
    exit_code: int
    message: str  # the message template: f-string fields shown as <expr>
    file: str  # repository-relative


def _error_classes(trees: dict[str, ast.Module]) -> dict[str, int]:
    """Every MemorydError subclass in the code (by class name) -> its exit code."""
    import memoryd.errors as errors

    codes: dict[str, int] = {
        name: cls.exit_code
        for name, cls in vars(errors).items()
        if isinstance(cls, type) and issubclass(cls, errors.MemorydError)
    }
    bases: dict[str, str] = {}
    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and node.bases and isinstance(node.bases[0], ast.Name):
                bases.setdefault(node.name, node.bases[0].id)
    changed = True
    while changed:
        changed = False
        for name, base in bases.items():
            if name not in codes and base in codes:
                codes[name] = codes[base]
                changed = True
    return codes


def _template(node: ast.expr, consts: dict[str, str] | None = None) -> str | None:
    consts = consts or {}
    if isinstance(node, ast.Name) and node.id in consts:
        return consts[node.id]
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        parts = []
        for v in node.values:
            if isinstance(v, ast.Constant):
                parts.append(str(v.value))
            elif isinstance(v, ast.FormattedValue):
                value = v.value
                parts.append(
                    consts[value.id]
                    if isinstance(value, ast.Name) and value.id in consts
                    else f"<{ast.unparse(value)}>"
                )
        return "".join(parts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _template(node.left, consts), _template(node.right, consts)
        return None if left is None or right is None else left + right
    if isinstance(node, ast.Name) and node.id.isupper():
        return f"<{node.id}>"
    return None


def _error_call(node: ast.AST) -> ast.Call | None:
    """The `SomeError("message")` a `raise` raises, or a `return` hands back (an operation's
    outcome returns the error its report means; the CLI raises it)."""
    value = node.exc if isinstance(node, ast.Raise) else node.value if isinstance(node, ast.Return) else None
    return value if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.args else None


def raise_sites(root: Path = ROOT) -> list[RaiseSite]:
    """Every `raise SomeMemorydError("message")` (or `return` of one) in daemon/ and workers/."""
    trees = {
        str(p.relative_to(root)): ast.parse(p.read_text(encoding="utf-8"))
        for d in ("daemon", "workers")
        for p in sorted((root / d).rglob("*.py"))
    }
    codes = _error_classes(trees)
    sites: list[RaiseSite] = []
    for rel, tree in trees.items():
        # Module-level message constants (NO_SELECTOR_MESSAGE = "…") are shown by their text.
        consts = {
            t.id: n.value.value
            for n in tree.body
            if isinstance(n, ast.Assign)
            and isinstance(n.value, ast.Constant)
            and isinstance(n.value.value, str)
            for t in n.targets
            if isinstance(t, ast.Name)
        }
        for node in ast.walk(tree):
            call = _error_call(node)
            if call is None or not isinstance(call.func, ast.Name) or call.func.id not in codes:
                continue
            message = _template(call.args[0], consts)
            if message:
                sites.append(RaiseSite(call.func.id, codes[call.func.id], " ".join(message.split()), rel))
    return sorted(set(sites), key=lambda s: (s.exit_code, s.file, s.message))


EXIT_MEANING = {
    1: "operation failed",
    2: "usage or configuration error (nothing was changed)",
    3: "refused (nothing was changed)",
}


def errors_reference(root: Path = ROOT) -> str:
    out = [
        "# Error messages",
        "",
        "Generated by `python -m tools.docsgen` from the `raise` sites in `daemon/` and `workers/`;",
        "a test fails if it differs. `<name>` marks a value filled in at run time. The CLI prints",
        "`memoryd: error: <message>` on stderr and exits with the code below; a job stores",
        '`{"error": "<class>", "message": "<message>"}` as its failed result.',
        "What to do about the common ones is in [troubleshooting.md](troubleshooting.md).",
        "",
    ]
    sites = raise_sites(root)
    for code in sorted({s.exit_code for s in sites}):
        out += [
            f"## Exit {code}: {EXIT_MEANING.get(code, '')}".rstrip(),
            "",
            "| message | error | raised in |",
            "|---|---|---|",
        ]
        for s in (x for x in sites if x.exit_code == code):
            msg = s.message.replace("|", "&#124;").replace("`", "'")
            out.append(f"| `{msg}` | {s.error} | `{s.file}` |")
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def generated_files(missing: list[str] | None = None) -> dict[str, str]:
    """Relative path -> the content the code says it should have.

    With `missing` given, parts whose code cannot be imported are named there and left out.
    """
    files: dict[str, str] = {
        "config/memoryd.example.toml": example_toml(),
        "docs/config-reference.md": config_reference(),
        "docs/errors.md": errors_reference(),
    }
    try:
        files["docs/cli-reference.md"] = cli_reference()
    except ImportError as exc:
        if missing is None:
            raise
        missing.append(f"cli: {exc.__class__.__name__}: {exc}")
    files.update(job_schemas(missing))
    files.update(cli_json_schemas(missing))
    return files


def stale_files(root: Path = ROOT, files: dict[str, str] | None = None) -> list[str]:
    files = generated_files() if files is None else files
    stale = []
    for rel, text in files.items():
        path = root / rel
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            stale.append(rel)
    return stale


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.docsgen", description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if a generated file differs; write nothing")
    a = ap.parse_args(argv)
    missing: list[str] = []
    files = generated_files(missing)
    stale = stale_files(ROOT, files)
    for line in missing:
        print(f"not generated: {line}", file=sys.stderr)
    if a.check:
        for rel in stale:
            print(f"{rel}: differs from the code; run `python -m tools.docsgen`", file=sys.stderr)
        return 1 if stale or missing else 0
    for rel in stale:
        path = ROOT / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(files[rel], encoding="utf-8")
        print(f"wrote {rel}")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
