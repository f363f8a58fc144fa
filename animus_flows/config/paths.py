"""Where a workflow keeps its runtime files (scratchpads): `.animus/` next to the YAML file."""

from __future__ import annotations

from pathlib import Path

from animus_flows.config.models import WorkflowFile

RUNTIME_DIR = ".animus"


def runtime_root(workflow: WorkflowFile) -> Path:
    return workflow.resolve_path(RUNTIME_DIR)
