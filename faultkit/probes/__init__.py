"""What faultkit asks a node directly: its health, its first token, its context limit,
and another machine's clock against this one's."""
