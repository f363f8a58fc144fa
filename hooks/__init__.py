"""Phase hooks: the built-in pre- and post-phase hooks, imported as `animus_flows.hooks`."""
