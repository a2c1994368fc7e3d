"""indexing rules (being written)."""
