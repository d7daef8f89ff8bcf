"""cuda-resolve's pip integration (to come): the ``cuda-pip`` wrapper that resolves, builds what
must be built, then runs the target interpreter's real ``python -m pip`` with pinned requirements,
index URLs and find-links. It drives pip only through its command line, never through pip's internal
modules."""
