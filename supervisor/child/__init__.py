"""The exec child: its process under a guardian that kills its tree when the claim lapses,
its readiness check, and the ``pre_promote`` command."""
