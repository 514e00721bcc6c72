"""The PySpark replay of the journal."""
