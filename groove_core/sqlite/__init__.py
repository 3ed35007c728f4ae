"""The SQLite wing: the built-in storage backend, and the only part of groove that speaks
SQLite, FTS5 and sqlite-vec.

``backend`` is the ``sqlite`` plugin (a backend of the ``groove_storage_backends`` hook,
registered like any third-party one); ``store`` is its connection, which implements the
contract of ``groove_core.storage``. Nothing outside this package imports it: the rest of
groove reads and writes an index through that contract, whichever backend holds it.
"""
