"""The semantic checks of `gitdns.core.validate`, one module per topic."""
