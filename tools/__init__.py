"""Developer tools (not shipped in the wheel): run from a checkout as `python -m tools.NAME`."""
