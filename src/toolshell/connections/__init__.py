"""One connection per configured server, all through `mcp.client.Client`."""
