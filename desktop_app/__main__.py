"""`python -m desktop_app` is the same as the `tandem` command."""
import sys

from desktop_app.cli import main

sys.exit(main())
