"""Failover URLs and a client that follows the master."""
