"""The operations memoryd runs (forget, erase, expire, the sweeps, dreaming, backfill): one
module per job family, above the domain packages and below the process (memoryd.runtime) and
the CLI. Compositions of two domain packages (an erasure's sessions through the forget
pipeline, `forget --verify`) live here too, so neither domain package imports the other."""
