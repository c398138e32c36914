"""The base layer: what every other part uses and that uses nothing above it — messages,
errors, secrets, templates, YAML with lines, schema dialects, text, limits, the plugin registry."""
