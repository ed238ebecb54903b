"""`toolshell serve`: the MCP server over stdio and Streamable HTTP, its gates, relay and parking."""
