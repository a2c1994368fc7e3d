"""shape rules (being written)."""
