"""Imported first by every script that needs torch (here and in bench/): Debian's python3-torch
lives in /usr/bin/python3, so a script started by another python3 without torch (e.g. a pyenv one
first on PATH) runs itself again under /usr/bin/python3."""

import os
import sys

try:
    import torch  # noqa: F401
except ImportError:
    if os.path.realpath(sys.executable) != os.path.realpath("/usr/bin/python3") and os.path.exists("/usr/bin/python3"):
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    raise
