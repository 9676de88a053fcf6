"""Spec layer: YAML loaded with positions, `extends:` resolved, validated into a Spec."""
