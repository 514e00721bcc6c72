"""The harness the tests and bench/ share: real supervisor processes and groups, pollers and
waits, STOMP traffic and its checker, the NFS emulator and the chaos trials, TLS certificates,
frame fuzzing, a Spark standalone cluster, the operator guide's examples, the CLI as a user
runs it. Plain library code: it imports nothing of tests/ outside tests.harness, and nothing
here is a test module or a conftest (tests/test_harness_boundary.py checks both)."""
