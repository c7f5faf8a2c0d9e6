"""``python -m hermes_store.cli`` runs the ``hermes-store`` command."""

from __future__ import annotations

from hermes_store.cli.app import main

if __name__ == "__main__":
    main()
