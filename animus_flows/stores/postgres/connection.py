"""The PostgreSQL store's connections: a pool per event loop, and errors that never show the DSN.

A psycopg `AsyncConnectionPool` belongs to the event loop that opened it, so the store keeps
one per loop (the CLI's facade, a flow run and a test each run their own). A pool's workers
ignore cancellation, so a loop that ends with a pool still open would wait for them forever:
each pool has a guard task that closes it when the loop's shutdown cancels its tasks, and a
script that never calls `aclose()` still exits. Every psycopg error
leaves as a `StoreError` whose message has the DSN, its password and any URL credentials
removed, raised from None so no chained exception carries them either; psycopg's own log
records get the same treatment (`DsnFilter`). A second record of one version in the ledger
(`schema.LEDGER_KEY`) is a `ConflictError`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from animus_flows.errors import (
    ConfigError,
    ConflictError,
    StoreError,
    StoreTimeout,
    StoreUnavailable,
)
from animus_flows.redaction import redact
from animus_flows.stores.postgres.schema import LEDGER_KEY

if TYPE_CHECKING:
    import psycopg
    from psycopg_pool import AsyncConnectionPool

POSTGRES_EXTRA = 'pip install "animus-flows[postgres]"'
HIDDEN = "[REDACTED:dsn]"
#: Shortest password hidden by substitution: a one-letter one would blank every such letter.
MIN_HIDDEN_CHARS = 3


def require_psycopg() -> None:
    """Import psycopg and its pool, or raise a ConfigError naming the extra to install."""
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError as exc:
        raise ConfigError(
            f"the PostgreSQL store needs psycopg and psycopg-pool, and {exc.name} is not "
            f"installed; install the postgres extra: {POSTGRES_EXTRA}"
        ) from None


def _parses(dsn: str) -> bool:
    from psycopg.conninfo import conninfo_to_dict

    try:
        conninfo_to_dict(dsn)
    except Exception:
        return False
    return True


def dsn_secrets(dsn: str) -> list[str]:
    """The strings of `dsn` that must never be shown: the DSN itself and its password, as
    written and as libpq reads it (percent-decoded)."""
    secrets = [dsn]
    try:
        from psycopg.conninfo import conninfo_to_dict

        password = conninfo_to_dict(dsn).get("password")
    except Exception:  # a DSN libpq cannot parse: hidden whole, and the connect error says so
        password = None
    if isinstance(password, str) and len(password) >= MIN_HIDDEN_CHARS:
        from urllib.parse import quote

        secrets += [password, quote(password, safe="")]
    return sorted(set(secrets), key=len, reverse=True)


class DsnFilter(logging.Filter):
    """Hides every registered DSN secret in log records (psycopg's pool logs connection
    errors), after the project's redaction; drops the pool's report of a connection attempt
    that the loop's shutdown cancelled, which is no error."""

    secrets: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and any(
            isinstance(arg, asyncio.CancelledError) for arg in record.args
        ):
            return False
        message = record.getMessage()
        hidden = hide(message, self.secrets)
        if hidden != message:
            record.msg, record.args = hidden, None
        return True


def _install_filter(secrets: list[str]) -> None:
    DsnFilter.secrets.update(secrets)
    for name in ("psycopg", "psycopg.pool", "animus_flows.stores.postgres"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, DsnFilter) for f in logger.filters):
            logger.addFilter(DsnFilter())


def hide(text: str, secrets: set[str] | list[str]) -> str:
    """`text` with each secret replaced and URL credentials redacted, on one line."""
    for secret in sorted(secrets, key=len, reverse=True):
        if secret:
            text = text.replace(secret, HIDDEN)
    return " ".join(redact(text).text.split())


class Database:
    """One store's connections to its PostgreSQL database (see the module).

    Args:
        dsn: a libpq connection string or URI; kept private, never shown.
        where: how errors name the store (its schema; never the DSN).
        pool_max_size: the most connections per event loop.
        connect_timeout_s: how long a new connection, or a wait for a free one, may take.
    """

    def __init__(
        self, dsn: str, *, where: str, pool_max_size: int = 10, connect_timeout_s: float = 10.0
    ) -> None:
        require_psycopg()
        if not _parses(dsn):  # libpq's message would quote the DSN's words: not quoted here
            raise ConfigError(
                f"{where}: the DSN is not a PostgreSQL connection string; write "
                "postgresql://USER:PASSWORD@HOST:PORT/DATABASE (or libpq's key=value form)"
            )
        self._dsn = dsn
        self._secrets = dsn_secrets(dsn)
        _install_filter(self._secrets)
        self.where = where
        self.pool_max_size = pool_max_size
        self.connect_timeout_s = connect_timeout_s
        self._pools: dict[asyncio.AbstractEventLoop, AsyncConnectionPool] = {}
        self._guards: dict[asyncio.AbstractEventLoop, asyncio.Task[None]] = {}

    def __repr__(self) -> str:
        return f"<Database {self.where}>"

    # -- errors ---------------------------------------------------------------------------

    def hide(self, text: str) -> str:
        return hide(text, self._secrets)

    def error(self, exc: BaseException) -> StoreError:
        """The StoreError for a psycopg error (its message with the DSN hidden)."""
        import psycopg
        from psycopg_pool import PoolTimeout

        if isinstance(exc, StoreError):
            return exc
        if isinstance(exc, PoolTimeout):
            return StoreTimeout(
                f"{self.where}: no free connection to PostgreSQL within "
                f"{self.connect_timeout_s:g} s; the server is unreachable or busy, or "
                "pool_max_size is too small for the load"
            )
        if (
            isinstance(exc, psycopg.errors.UniqueViolation)
            and exc.diag.constraint_name == LEDGER_KEY
        ):
            return ConflictError(
                f"{self.where}: another writer recorded a change of the same key at the same "
                "moment, and nothing was written; read it again and retry"
            )
        message = self.hide(str(exc)) or type(exc).__name__
        if isinstance(exc, psycopg.errors.QueryCanceled):
            return StoreTimeout(f"{self.where}: PostgreSQL cancelled the statement ({message})")
        if isinstance(exc, psycopg.OperationalError) and not getattr(exc, "sqlstate", None):
            return StoreUnavailable(
                f"{self.where}: cannot reach PostgreSQL ({message}); check the server is up "
                "and the DSN (its host, port, database and credentials)"
            )
        state = getattr(exc, "sqlstate", None)
        code = f" [{state}]" if state else ""
        return StoreUnavailable(f"{self.where}: PostgreSQL failed{code}: {message}")

    # -- connections ------------------------------------------------------------------------

    async def connect(self) -> psycopg.AsyncConnection[Any]:
        """A connection of its own, outside the pool (migrations), in autocommit mode."""
        import psycopg

        try:
            return await psycopg.AsyncConnection.connect(
                self._dsn, autocommit=True, connect_timeout=max(1, round(self.connect_timeout_s))
            )
        except psycopg.Error as exc:
            error = self.error(exc)
        raise error  # outside the handler: libpq's own exception is not even its context

    async def _pool(self) -> AsyncConnectionPool:
        loop = asyncio.get_running_loop()
        pool = self._pools.get(loop)
        if pool is None:
            from psycopg_pool import AsyncConnectionPool

            self._forget_ended_loops()
            pool = AsyncConnectionPool(
                self._dsn,
                min_size=1,
                max_size=self.pool_max_size,
                kwargs={"autocommit": True},
                timeout=self.connect_timeout_s,
                name=self.where,
                open=False,
            )
            self._pools[loop] = pool
            self._guards[loop] = loop.create_task(_close_at_shutdown(pool))
            await pool.open(wait=False)
        return pool

    def _forget_ended_loops(self) -> None:
        for loop in [loop for loop in self._pools if loop.is_closed()]:
            del self._pools[loop]  # closed by its guard as the loop shut down
            self._guards.pop(loop, None)

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        """A pooled connection of this event loop; psycopg errors become StoreErrors."""
        import psycopg
        from psycopg_pool import PoolTimeout

        pool = await self._pool()
        try:
            async with pool.connection() as conn:
                yield conn
        except (psycopg.Error, PoolTimeout) as exc:
            raise self.error(exc) from None

    async def aclose(self) -> None:
        """Close this loop's pool (and forget those of loops that ended)."""
        loop = asyncio.get_running_loop()
        pool = self._pools.pop(loop, None)
        guard = self._guards.pop(loop, None)
        self._forget_ended_loops()
        if pool is not None:
            await pool.close()
        if guard is not None:
            guard.cancel()


async def _close_at_shutdown(pool: AsyncConnectionPool) -> None:
    """Wait until cancelled (the loop shuts down, or the store closes), then close `pool`."""
    try:
        await asyncio.Event().wait()
    finally:
        await pool.close()
