"""Request handlers (one module per API key) and the broker state they operate on."""
