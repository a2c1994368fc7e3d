"""linalg rules (being written)."""
