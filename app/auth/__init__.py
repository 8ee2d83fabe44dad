"""API tokens: hashed secrets with scopes, their routes, CLI commands and the per-token rate limit."""
