r"""`python -m pyg_degreembed.cli`: the command line."""
import sys

from pyg_degreembed.cli import main

sys.exit(main())
