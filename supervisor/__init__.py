"""The node: its configuration (``config``), the role machine (``machine``), the shell that
runs it and its threads (``shell``), and the exec child under its guardian (``child``)."""
