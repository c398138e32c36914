"""The tool catalog: loading tool files, linting descriptions, exporting definitions."""

from toolrun.catalog.model import Annotations, BackendSpec, Catalog, SourceLocation, Tool

__all__ = ["Annotations", "BackendSpec", "Catalog", "SourceLocation", "Tool"]
