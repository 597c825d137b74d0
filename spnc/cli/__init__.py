"""Console tools: ``spnc-convert`` (spnc.cli.convert) and ``spnc-eval`` (spnc.cli.evaluate).
Each module defines ``main(argv=None) -> int``."""
