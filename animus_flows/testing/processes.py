"""Child processes for tests and benchmarks: started in a group of their own, stopped whole.

A Prefect server or worker starts children of its own (the UI server, a flow run's process);
stopping only the parent would orphan them. `ProcessGroup` signals the whole group.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from typing import Any


class ProcessGroup:
    """A child started in a process group of its own, and stopped whole: no orphans.

    The leader is reaped only once the group has been killed: until then its zombie keeps
    its pid, which is the group's id, from being reused, so the signals reach no one else.
    """

    def __init__(self, command: list[str], **options: Any) -> None:
        self.process = subprocess.Popen(command, start_new_session=True, **options)

    def poll(self) -> int | None:
        """The leader's exit status once it has exited, without reaping it."""
        if self.process.returncode is not None:
            return self.process.returncode
        info = os.waitid(os.P_PID, self.process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        return None if info is None else info.si_status

    def stop(self, grace_s: float = 15) -> None:
        """SIGTERM to the group, SIGKILL to whatever is left after `grace_s`; idempotent."""
        if self.process.returncode is not None:
            return  # stopped and reaped already
        pgid = self.process.pid
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while self.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        with contextlib.suppress(ProcessLookupError):  # stragglers, or a leader that hung
            os.killpg(pgid, signal.SIGKILL)
        self.process.wait(timeout=15)


def clean_environment() -> dict[str, str]:
    """This process's environment without Prefect settings: each child gets its own."""
    return {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
