"""``python -m nnrt_serve ARGS`` is ``nnrt serve ARGS``."""
import sys

from nnrt_serve.cli import main

sys.exit(main())
