"""Per-filesystem profiles for the share and the checker behind `primacy doctor`."""
