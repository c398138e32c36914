"""``toolrun view``: one run as a self-contained HTML timeline, from the run log or a transcript; a batch as a table."""

from toolrun.view.batch import render_batch_page
from toolrun.view.page import render_page
from toolrun.view.timeline import timeline_from_log, timeline_from_transcript

__all__ = ["render_batch_page", "render_page", "timeline_from_log", "timeline_from_transcript"]
