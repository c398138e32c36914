"""Sessions with a model: a recipe played, an ask, a chat; recipe files, run options, expect
checks and the recipe cache. Each drives the run loop."""
