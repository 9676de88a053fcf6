"""Spec layer: YAML files loaded with positions, `extends:` resolved, validated into a typed Spec."""
