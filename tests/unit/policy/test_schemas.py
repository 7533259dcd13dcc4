"""The committed JSON Schemas are the generated ones, and every field is explained."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from daemon.policy.loading import parse_policy
from daemon.policy.schemas import policy_schema, policy_test_schema, render

ROOT = Path(__file__).resolve().parents[3]
SCHEMAS = [
    ("docs/schemas/policy.schema.json", policy_schema),
    ("docs/schemas/policy-test.schema.json", policy_test_schema),
]


@pytest.mark.parametrize(("path", "generate"), SCHEMAS)
def test_committed_schemas_are_up_to_date(path: str, generate: Callable[[], Any]) -> None:
    committed = (ROOT / path).read_text()
    flag = " --tests" if "test" in path else ""
    assert committed == render(generate()), f"regenerate: vllm-governor schema{flag} > {path}"


def properties(schema: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    definitions = {"(root)": schema, **schema.get("$defs", {})}
    return [
        (model, name, prop)
        for model, definition in definitions.items()
        for name, prop in definition.get("properties", {}).items()
    ]


@pytest.mark.parametrize(("path", "generate"), SCHEMAS)
def test_every_field_has_a_description_for_editors(path: str, generate: Callable[[], Any]) -> None:
    missing = [
        f"{model}.{name}"
        for model, name, prop in properties(generate())
        if not prop.get("description")
    ]
    assert missing == [], f"describe them in daemon/policy/schemas.py or the model ({path})"


def test_the_policy_schema_knows_the_knobs_and_the_yaml_key_for() -> None:
    schema = policy_schema()
    assert "for" in schema["properties"]
    assert (
        "max_num_seqs"
        in schema["$defs"]["ActionModel"]["properties"]["set"]["propertyNames"]["enum"]
    )


def test_the_examples_of_the_policy_schema_are_valid_policies() -> None:
    # Every example value of a top-level field, put into a minimal policy, must load.
    for _, name, prop in properties(policy_schema()):
        for example in prop.get("examples", []):
            if name in ("name", "when", "for", "clear", "keep_firing_for", "cooldown", "targets"):
                base = {"name": "p", "when": "kv_usage > 0.9", name: example}
                parse_policy(yaml.safe_dump(base), Path("example.yaml"))
