"""The JSON Schema of the workflow file, for editors (`animus schema`)."""

from __future__ import annotations

from typing import Any

from animus_flows.config.models import WorkflowFile


def workflow_json_schema() -> dict[str, Any]:
    schema = WorkflowFile.model_json_schema(mode="validation")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://animus-flows.dev/schema/workflow-v1.json",
        **schema,
        "title": "animus-flows workflow file (version 1)",
    }
