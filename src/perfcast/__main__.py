import sys

from perfcast.cli import main

sys.exit(main())
