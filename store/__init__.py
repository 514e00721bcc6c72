"""The journal on the share: segments, batches, group commit, fences, checkpoints, recovery."""

# Before any of the package's modules: a compiled one older than its source is not imported.
from primacy.store.compiled import install as _install_compiled_finder

_install_compiled_finder()
