"""Importing an OpenAPI (3.0, 3.1) or Swagger 2.0 document as a toolset of HTTP tools.

``import_openapi(spec)`` reads the document and returns the toolset's text with what was
skipped and why; ``lint_toolset(text)`` loads that text as toolrun would and lints it.
The command line's ``toolrun import openapi`` is these two calls and some printing.
"""

from toolrun.openapi.document import OpenAPIError
from toolrun.openapi.importer import ImportResult, Skipped, import_openapi
from toolrun.openapi.review import FindingGroup, ToolsetReview, group_findings, lint_toolset

__all__ = ["FindingGroup", "ImportResult", "OpenAPIError", "Skipped", "ToolsetReview", "group_findings",
           "import_openapi", "lint_toolset"]
