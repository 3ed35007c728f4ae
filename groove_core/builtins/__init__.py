"""groove's own features, registered as plugins like any third-party one: the built-in legs
(``legs``), match highlighting (``highlight``) and embedders (``embedders``). The plugin
manager (``groove_core.plugins``) lists them, with the SQLite backend, as the defaults."""
