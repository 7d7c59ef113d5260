"""One module per benchmark scenario (issue 10 item 2); the runner discovers them by name."""
