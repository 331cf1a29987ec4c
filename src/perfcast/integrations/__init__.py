"""Bridges to other tools' data structures, each behind an optional extra.

The core never imports this package (the import contract forbids thicket and hatchet
below it); a user who has the structures imports the bridge:
:mod:`perfcast.integrations.thicket` (``pip install 'perfcast[thicket]'``).
"""
