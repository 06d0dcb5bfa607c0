"""The compiles view."""
