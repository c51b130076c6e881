"""`python -m crac_py.codegen`: the generator's command line (generate.py)."""

import sys

from crac_py.codegen.generate import main

sys.exit(main())
