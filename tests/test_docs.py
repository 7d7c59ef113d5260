"""The generated reference docs match the code, so they cannot drift: config reference, example
TOML, CLI reference and the JSON Schemas of job payloads and results."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

from memoryd.ops.registry import OPS, op_named
from memoryd.settings import load_settings, settings_as_dict
from tools import docsgen

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "config" / "memoryd.example.toml"


def test_committed_reference_docs_equal_what_the_code_generates() -> None:
    files = docsgen.generated_files()  # raises if a job's models or the CLI cannot be imported
    assert docsgen.stale_files(ROOT, files) == [], "run `python -m tools.docsgen` and commit the result"


def test_every_job_has_a_payload_and_a_result_schema() -> None:
    for job in (op.contract.name for op in OPS):
        for kind in ("payload", "result"):
            schema = json.loads((ROOT / "docs" / "schemas" / f"{job}.{kind}.schema.json").read_text())
            assert schema["type"] == "object" and "properties" in schema, f"{job}.{kind}"
        payload = json.loads((ROOT / "docs" / "schemas" / f"{job}.payload.schema.json").read_text())
        assert payload.get("additionalProperties") is False, f"{job} payload must reject unknown fields"


def test_the_job_contract_lists_every_operation_with_its_schemas() -> None:
    text = (ROOT / "docs" / "jobs.md").read_text()
    for op in OPS:
        row = (
            f"| `{op.contract.name}` | [{op.contract.name}.payload](schemas/{op.contract.name}.payload.schema.json) | "
            f"[{op.contract.name}.result](schemas/{op.contract.name}.result.schema.json) | {op.contract.summary} |"
        )
        assert row in text, f"docs/jobs.md: no table row for {op.contract.name} with its summary"


def test_example_config_loads_and_its_values_are_the_defaults(tmp_path: Path) -> None:
    from_example = settings_as_dict(load_settings(EXAMPLE))
    defaults = settings_as_dict(load_settings(None))
    assert from_example == defaults


def test_example_config_names_every_setting_in_its_table() -> None:
    text = EXAMPLE.read_text()
    table = ""
    seen: set[str] = set()
    for line in text.splitlines():
        if m := re.match(r"^\[([\w.]+)\]$", line):
            table = m[1]
        elif m := re.match(r"^(?:# )?(\w+) =", line):
            seen.add(f"{table}.{m[1]}" if table else m[1])
    for key in docsgen.setting_keys():
        if key.dotted != "agents":
            assert key.dotted in seen, f"{key.dotted} is missing from {EXAMPLE.name}"
    assert "# [agents.main]" in text
    tomllib.loads(text)


def test_config_reference_lists_every_key_with_its_environment_variable() -> None:
    text = (ROOT / "docs" / "config-reference.md").read_text()
    for key in docsgen.setting_keys():
        assert f"`{key.env}`" in text


def test_docsgen_check_fails_on_a_drifted_file(tmp_path: Path) -> None:
    files = {"docs/x.md": "generated\n"}
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "x.md").write_text("edited by hand\n")
    assert docsgen.stale_files(tmp_path, files) == ["docs/x.md"]
    (tmp_path / "docs" / "x.md").write_text("generated\n")
    assert docsgen.stale_files(tmp_path, files) == []


def test_job_payload_examples_in_the_docs_are_accepted_by_the_request_models() -> None:
    text = (ROOT / "docs" / "jobs.md").read_text()
    examples = re.findall(r"<!-- payload: (\w+) -->\n```json\n(.*?)```", text, re.S)
    assert {job for job, _ in examples} >= {"forget", "erase"}
    for job, body in examples:
        op_named(job).contract.parse(json.loads(body))


def test_error_catalogue_quotes_raise_sites_with_their_exit_codes() -> None:
    sites = docsgen.raise_sites()
    by_message = {s.message: s for s in sites}
    demo = next(s for m, s in by_message.items() if "already holds a memoryd.toml" in m)
    assert (demo.error, demo.exit_code, demo.file) == ("UsageError", 2, "daemon/demo.py")
    lock = next(s for s in sites if s.error == "LockTimeout")
    assert lock.exit_code == 3 and "waiting for the workspace lock" in lock.message
    # Message constants are shown by their text, not their name.
    assert any(s.message.startswith("memory forget requires a session") for s in sites)


def test_every_command_with_json_output_has_a_documented_schema() -> None:
    documented = docsgen.cli_json_models()
    assert docsgen.json_commands() == sorted(documented)
    for command in documented:
        schema = json.loads(
            (ROOT / "docs" / "schemas" / "cli" / f"{command.replace(' ', '-')}.schema.json").read_text()
        )
        assert schema["title"] == f"memoryd {command} --json"


def test_demo_init_json_output_has_the_documented_fields_in_order(tmp_path: Path, capsys) -> None:
    from memoryd.cli import main

    assert main(["demo", "init", str(tmp_path / "d"), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    schema = json.loads((ROOT / "docs" / "schemas" / "cli" / "demo-init.schema.json").read_text())
    assert list(printed) == list(schema["properties"])


def _property_names(schema: object) -> set[str]:
    names: set[str] = set()
    if isinstance(schema, dict):
        for key, value in schema.items():
            if key == "properties" and isinstance(value, dict):
                names.update(value)
            names |= _property_names(value)
    elif isinstance(schema, list):
        for item in schema:
            names |= _property_names(item)
    return names


def test_every_json_document_uses_camel_case_names() -> None:
    """One JSON style for every --json and every job result. `config check` is the exception
    that proves it: it prints the settings under the config file's own keys."""
    snake = {}
    for name, text in {**docsgen.cli_json_schemas(), **docsgen.generated_files()}.items():
        if not name.endswith(".schema.json") or name.endswith("config-check.schema.json"):
            continue
        if name.endswith(".payload.schema.json"):
            continue  # job payloads are the requests' own field names (snake_case on the wire)
        found = sorted(p for p in _property_names(json.loads(text)) if "_" in p)
        if found:
            snake[name] = found
    assert snake == {}
