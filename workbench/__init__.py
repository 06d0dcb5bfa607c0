"""Read recorded sessions and show them: a terminal summary now; TUI and Graphviz views to come."""
