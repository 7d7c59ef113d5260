"""memoryd's jobs for arq's own command: `arq memoryd.workers.settings.WorkerSettings` (see settings.py).
The job functions are generated from the operation registry (memoryd.runtime.jobs); the daemon
(`memoryd run`) runs the same ones in its own worker."""
