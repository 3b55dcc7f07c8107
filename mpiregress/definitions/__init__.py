"""The project's own definitions: rendering the derived files (generate) and checking they agree (lint)."""
