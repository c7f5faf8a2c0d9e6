"""Message search: query sanitising, CJK detection, routing and the backend queries."""
