"""Entry point of the frozen app (PyInstaller runs this file as ``__main__``).

``multiprocessing.freeze_support()`` comes first: the engine runs in a child
process started with the spawn method, and a frozen child is the same
executable started with multiprocessing's own arguments. Without this call the
child would parse them as localchat's command line and open a second window.
"""

import multiprocessing
import sys

if __name__ == "__main__":
    multiprocessing.freeze_support()
    from localchat.cli import main

    sys.exit(main())
