"""The history store: every accepted run's series, for the gate, change points and proposals."""
