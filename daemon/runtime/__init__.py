"""The process: service lifecycle, scheduler, sd_notify, metrics, the arq worker, the client and
the store pool. It sits above the domain; nothing in the domain imports it."""
