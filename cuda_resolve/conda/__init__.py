"""The conda-facing logic of cuda-resolve, with no import of conda (CI tests it without conda).

- :mod:`.matchspec`: the part of conda's match-spec language channel records use in ``depends``.
- :mod:`.records`: package records (a channel's, a prefix's ``conda-meta``) and the torch an
  environment has, from a channel (``pytorch``) or from pip (``torch``).
- :mod:`.serve`: can a channel's build serve this machine and this environment?
- :mod:`.package`: a built wheel converted into a ``.conda`` package whose record pins its ABI.
- :mod:`.channel`: the local channel cuda-resolve owns (repodata written here, pruning).
- :mod:`.backend`: a complete plan carried out through conda's solver and transaction.
- :mod:`.session`: what the plugin's hooks decide around one conda command (what is deferred,
  the post-solve veto, finishing after the command) and the state between them, behind three
  small protocols (the solver, the install transaction, the prefix's records).
- :mod:`.subcommand`: ``conda cuda ...`` as cuda-resolve's command line.

The conda plugin (``conda_plugin``) only registers hooks, turns conda's objects into these and
back, and implements the session's protocols over conda's API.
"""
