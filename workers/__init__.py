"""arq job functions and WorkerSettings; one module per job family."""
