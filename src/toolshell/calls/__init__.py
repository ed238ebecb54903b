"""The call pipeline: `prepare` (pure: resolve, build input, validate), then `Pipeline.send`
(ledger → approval → guards → the one call). See `docs/architecture.md`."""
