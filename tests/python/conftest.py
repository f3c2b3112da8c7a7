"""Fixtures every test file shares: the store the servers under test use (see store.py)."""

from __future__ import annotations

import os
from typing import Iterator

import pytest

import store


@pytest.fixture(autouse=True)
def _test_store() -> Iterator[None]:
    """On PostgreSQL, a database of the test's own for everything it starts."""
    if not store.on_postgres():
        yield
        return
    name, url = store.create_database()
    os.environ[store.CURRENT_VAR] = url
    try:
        yield
    finally:
        os.environ.pop(store.CURRENT_VAR, None)
        store.drop_database(name)
