"""The workflow YAML file: models, loading and validation."""

from animus_flows.config.loader import load_workflow, parse_workflow
from animus_flows.config.models import (
    AgentConfig,
    BlockRef,
    BudgetConfig,
    CommandRunner,
    JsonRpcSpec,
    MemoryBinding,
    MemoryLoaderConfig,
    PhaseConfig,
    PythonRunner,
    SQLiteSpec,
    StoreSpec,
    WorkflowConfig,
    WorkflowFile,
    ZepSpec,
)

__all__ = [
    "AgentConfig",
    "BlockRef",
    "BudgetConfig",
    "CommandRunner",
    "JsonRpcSpec",
    "MemoryBinding",
    "MemoryLoaderConfig",
    "PhaseConfig",
    "PythonRunner",
    "SQLiteSpec",
    "StoreSpec",
    "WorkflowConfig",
    "WorkflowFile",
    "ZepSpec",
    "load_workflow",
    "parse_workflow",
]
