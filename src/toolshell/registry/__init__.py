"""Tool entries, naming, filters and roles, search, and input validation. Pure: no I/O."""
