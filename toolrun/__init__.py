"""toolrun: a tool runner for LLM tool calling, configured entirely in YAML."""

__version__ = "0.1.0"
