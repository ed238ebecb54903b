"""scripts."""
