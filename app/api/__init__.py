"""HTTP: routes, request/response schemas, dependencies, error mapping."""
