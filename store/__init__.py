"""The journal on the share: segments, batches, group commit, fences, checkpoints, recovery."""
