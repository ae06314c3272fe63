"""Loaded by every Python process the tests start (their PYTHONPATH holds this folder): record the rules it reports."""

import rules_recorder

rules_recorder.install()
