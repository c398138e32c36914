"""The tool catalog: loading tool files, linting descriptions, exporting definitions."""

from toolrun.catalog.model import Catalog
from toolrun.core.tool import Annotations, BackendSpec, SourceLocation, Tool

__all__ = ["Annotations", "BackendSpec", "Catalog", "SourceLocation", "Tool"]
