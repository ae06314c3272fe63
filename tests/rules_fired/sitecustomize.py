"""Loaded by every Python process the tests start (their PYTHONPATH holds this folder): record the rules it reports,
and end without the garbage collector's exit passes, as kubetrain's own processes do
(kubetrain_runtime/interpreter_exit.py): torchrun's agent and every script that imports torch exits a second sooner."""

import atexit
import gc

import rules_recorder

rules_recorder.install()
atexit.register(gc.freeze)  # registered first, run last: after every exit function the process registers
