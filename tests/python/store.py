"""Which store the servers under test keep their state in.

By default each test's server uses SQLite files in its own data directory. With
`RINGFENCE_TEST_STORE=postgres` (and `RINGFENCE_TEST_DATABASE_URL` naming a cluster, as
`scripts/test.sh` sets them) every test gets a new, empty PostgreSQL database, dropped after
it, and every process the test starts is pointed at it through `RINGFENCE_DATABASE_URL`
(`store_env()`, merged into each test helper's environment).
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import uuid
from typing import Iterator

MODE_VAR = "RINGFENCE_TEST_STORE"
CLUSTER_VAR = "RINGFENCE_TEST_DATABASE_URL"
# The current test's database (set by the autouse fixture in conftest.py).
CURRENT_VAR = "RINGFENCE_TEST_CURRENT_DATABASE_URL"


def on_postgres() -> bool:
    return os.environ.get(MODE_VAR, "sqlite") == "postgres"


def store_env() -> dict[str, str]:
    """The variables that point a ringfence process at the current test's store."""
    url = os.environ.get(CURRENT_VAR)
    return {"RINGFENCE_DATABASE_URL": url} if url else {}


def psql(url: str, sql: str) -> str:
    out = subprocess.run(["psql", "-X", "-q", "-At", url, "-c", sql],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


def with_database(url: str, name: str) -> str:
    return re.sub(r"(postgres(?:ql)?://[^/?]*)(/[^?]*)?", lambda m: f"{m.group(1)}/{name}", url, count=1)


def create_database() -> tuple[str, str]:
    """A new empty database in the test cluster: (its name, its URL)."""
    cluster = os.environ.get(CLUSTER_VAR)
    assert cluster, f"{MODE_VAR}=postgres needs {CLUSTER_VAR} (scripts/postgres.sh start DIR prints one)"
    name = f"rf_py_{uuid.uuid4().hex}"
    psql(cluster, f"CREATE DATABASE {name}")
    return name, with_database(cluster, name)


def drop_database(name: str) -> None:
    psql(os.environ[CLUSTER_VAR], f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@contextlib.contextmanager
def another_store() -> Iterator[dict[str, str]]:
    """The variables for a second, separate store (on SQLite another data directory is
    one already: nothing to add)."""
    if not on_postgres():
        yield {}
        return
    name, url = create_database()
    try:
        yield {"RINGFENCE_DATABASE_URL": url}
    finally:
        drop_database(name)
