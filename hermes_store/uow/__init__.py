"""The unit of work, sync and asyncio: one retried write transaction, short reads."""
