"""The run log: every run in SQLite (``RunLog``), written event by event (``RunLogWriter``).

``toolrun logs`` reads it (``toolrun.runlog.search`` finds runs by their words); ``toolrun view`` draws one of its runs as a timeline.
"""

from toolrun.runlog.store import LOGS_ENV, RunLog, default_log_path
from toolrun.runlog.writer import RunLogWriter, message_json, run_status

__all__ = ["LOGS_ENV", "RunLog", "RunLogWriter", "default_log_path", "message_json", "run_status"]
