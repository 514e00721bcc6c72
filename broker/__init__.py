"""The built-in transport connector: STOMP 1.0, 1.1 and 1.2, persistent queues in the journal."""

# Before any of the package's modules: a compiled one older than its source is not imported.
from primacy.store.compiled import install as _install_compiled_finder

_install_compiled_finder()
