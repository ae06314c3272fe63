"""Kinds: what kubetrain knows about each API kind it emits or reads, one descriptor per kind (see base.py)."""
