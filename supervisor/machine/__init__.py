"""The role machine: its states and transitions (``role_table``), its events and actions
(``role_events``), and the machine that applies them (``roles``); no I/O, no clock."""
