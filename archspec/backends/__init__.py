"""Backends: each reads the IR (never YAML) and produces one kind of output."""
