"""The devices view."""
