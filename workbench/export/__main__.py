"""`python -m workbench.export TRACE.json --view jaxpr -o OUT.svg`."""
import sys

from ._api import main

sys.exit(main())
