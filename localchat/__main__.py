import sys

from localchat.cli import main

sys.exit(main())
