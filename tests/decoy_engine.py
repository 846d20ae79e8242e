"""A slow fake engine behind an entry point (tests/test_stored_choice.py):
a measuring build times it and never chooses it."""
from __future__ import annotations

from fakes import fake_plugin
from test_schedulers import ELEMENTWISE, timed_backend

__all__ = ["Decoy", "plugin"]

Decoy = timed_backend("decoy", ELEMENTWISE, delay=0.02, device_type="cpu")
Decoy.emulated = False  # a real engine: with another one, backends="auto" measures
plugin = fake_plugin(Decoy)
