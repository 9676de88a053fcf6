"""The exporter (spec -> transformers config.json) lives with the families it exports, in
`archspec.hf.export_config`; this name is kept for the code that imports it from `bench`."""

from archspec.hf.export_config import hf_config_dict

__all__ = ["hf_config_dict"]
