"""A throwaway PostgreSQL cluster started from the system's binaries, for tests and benchmarks.

    with TemporaryCluster() as cluster:
        store = PostgresStore(cluster.dsn("animus"))

`initdb` and `pg_ctl` come from `PATH` or from the newest `/usr/lib/postgresql/<N>/bin` (Debian's
`postgresql` package). `initdb` refuses to run as root, so under root the cluster's programs
run as the `postgres` user (`runuser`). The cluster listens on 127.0.0.1 on a free port, trusts
local connections, and is deleted when the context exits.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

SUPERUSER = "animus"


class ClusterUnavailable(RuntimeError):
    """No PostgreSQL binaries on this machine (install Debian's `postgresql`)."""


def find_binaries() -> Path:
    """The folder holding `initdb` and `pg_ctl`; ClusterUnavailable when there is none."""
    on_path = shutil.which("pg_ctl")
    if on_path and shutil.which("initdb"):
        return Path(on_path).parent
    installed = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"),
        key=lambda path: int(path.parent.parent.name) if path.parent.parent.name.isdigit() else 0,
    )
    if installed:
        return installed[-1].parent
    raise ClusterUnavailable(
        "no PostgreSQL binaries (initdb, pg_ctl) on PATH or in /usr/lib/postgresql/*/bin; "
        "install them, e.g. `apt-get install postgresql`"
    )


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class TemporaryCluster:
    """A PostgreSQL cluster in a temporary folder; a context manager.

    Args:
        durable: keep PostgreSQL's crash safety (fsync, full page writes). Off by default:
            a throwaway cluster gains speed and loses nothing worth keeping. Benchmarks that
            report write throughput pass `durable=True`.
        max_connections: the server's limit; a scale-out test runs many pools at once.
        settings: more server settings (`{"shared_buffers": "2GB"}`), as `-c name=value`.
    """

    def __init__(
        self,
        *,
        durable: bool = False,
        max_connections: int = 200,
        settings: dict[str, object] | None = None,
    ) -> None:
        self.bin = find_binaries()
        self.durable = durable
        self.max_connections = max_connections
        self.settings = dict(settings or {})
        self.port = 0
        self.folder: Path | None = None

    def dsn(self, database: str = "postgres") -> str:
        """A connection string for `database` as the cluster's superuser."""
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{quote(database)}"

    def create_database(self, name: str) -> str:
        """Create database `name` (idempotent); returns its DSN."""
        import psycopg

        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,))
            if exists.fetchone() is None:
                conn.execute(f'CREATE DATABASE "{name}"')
        return self.dsn(name)

    def __enter__(self) -> TemporaryCluster:
        self.folder = Path(tempfile.mkdtemp(prefix="animus-pg-"))
        data = self.folder / "data"
        if os.geteuid() == 0:
            # The postgres user must own (and reach) its data folder.
            shutil.chown(self.folder, "postgres")
            os.chmod(self.folder, 0o755)
        self._run(
            "initdb",
            "-D",
            data,
            "-U",
            SUPERUSER,
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--locale",
            "C.UTF-8",
            "--no-sync",
        )
        settings = {
            "listen_addresses": "127.0.0.1",
            "unix_socket_directories": str(self.folder),
            "max_connections": self.max_connections,
        }
        if not self.durable:
            settings |= {"fsync": "off", "full_page_writes": "off", "synchronous_commit": "off"}
        settings |= self.settings
        options = " ".join(f"-c {name}={value}" for name, value in settings.items())
        for _attempt in range(3):  # a free port can be taken before the server binds it
            self.port = free_port()
            started = self._run(
                "pg_ctl",
                "-D",
                data,
                "-l",
                self.folder / "server.log",
                "-w",
                "-t",
                "60",
                "-o",
                f"-p {self.port} {options}",
                "start",
                check=False,
            )
            if started.returncode == 0:
                return self
            time.sleep(0.2)
        log = (self.folder / "server.log").read_text(errors="replace")[-2000:]
        self._remove()
        raise ClusterUnavailable(f"PostgreSQL did not start: {log.strip()}")

    def __exit__(self, *exc_info) -> None:
        if self.folder is not None:
            self._run(
                "pg_ctl", "-D", self.folder / "data", "-m", "immediate", "-w", "stop", check=False
            )
            self._remove()

    def _remove(self) -> None:
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None

    def _run(self, program: str, *args, check: bool = True) -> subprocess.CompletedProcess:
        command = [str(self.bin / program), *map(str, args)]
        if os.geteuid() == 0:
            command = ["runuser", "-u", "postgres", "--", *command]
        result = subprocess.run(command, capture_output=True, text=True, cwd="/")
        if check and result.returncode != 0:
            raise ClusterUnavailable(f"{program} failed: {result.stderr.strip()[-2000:]}")
        return result
