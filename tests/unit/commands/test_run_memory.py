"""`inferscale run` caps glibc's malloc arenas before any thread starts, unless the user set it."""

from __future__ import annotations

import ctypes.util
import platform

import pytest

from inferscale.commands.run import limit_malloc_arenas


def test_an_explicit_malloc_arena_max_is_left_to_the_user(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    assert limit_malloc_arenas() is False


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt(M_ARENA_MAX) is glibc's")
def test_glibc_accepts_the_arena_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    assert ctypes.util.find_library("c") is not None
    assert limit_malloc_arenas() is True
