r"""`python -m pyg_degreembed.cli`: the command line."""
import sys

from pyg_degreembed.cli import main

if __name__ == '__main__':
    sys.exit(main())
