"""The plugin's entry point: ``python <this folder> <engine address>`` (how Pulumi runs a source-based plugin
whose ``PulumiPlugin.yaml`` says ``runtime: python``), or ``python -m pulumi_together_rl.plugin``."""

import os
import sys

if __name__ == "__main__":
    # Run as a folder, this folder is sys.path[0]: its modules (provider, server, ...) must not shadow top-level
    # modules of the same names for the libraries that import them.
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]

    from pulumi_together_rl.plugin.server import main

    main()
