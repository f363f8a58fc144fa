"""animus-flows: the memory layer for agent workflows on Prefect 3.

Example:
    ```python
    from animus_flows import load_workflow

    workflow = load_workflow("animus.yaml")
    ```
"""

from animus_flows.config.loader import load_workflow

__all__ = ["load_workflow"]
__version__ = "0.1.0"
