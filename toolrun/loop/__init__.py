"""The run loop: turns, one tool call, scheduling, call ids, approval, results, recorded tool
results. It knows nothing of recipes or of any provider's wire format."""
