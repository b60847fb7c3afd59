"""The `tandem` subcommands, one module each; `desktop_app.cli` parses arguments and dispatches here."""
