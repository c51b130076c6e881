"""The coordinator of multi-process jobs (docs/PROTOCOL.md): the asyncio server, its wire format,
the client `crac command` and the loader use, starting one on demand, and the job's restart
script."""
