"""The HTTP status endpoint: role as status codes for load balancers, JSON for people."""
