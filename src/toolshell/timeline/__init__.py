"""timeline."""
