import sys

from mpiregress.cli import main

sys.exit(main())
