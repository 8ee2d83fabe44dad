"""API tokens: hashed secrets with scopes and issuers, their routes, the rate limits and the client address they count by."""
