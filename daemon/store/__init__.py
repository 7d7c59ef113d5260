"""SQLite storage: one database per agent, schema by migrations, typed repositories."""
