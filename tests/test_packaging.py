"""How the project is installed and tested: a hung test times out."""

from __future__ import annotations

import pytest


def test_a_hung_test_times_out(request: pytest.FixtureRequest) -> None:
    assert request.config.pluginmanager.hasplugin("timeout")
    assert float(request.config.getini("timeout")) >= 120  # generous for a loaded 2-core machine
