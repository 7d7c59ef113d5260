"""`python -m memoryd`: the same command line as the `memoryd` script."""

from memoryd.cli import console_main

console_main()
