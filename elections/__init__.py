"""Controller election with epoch fencing and the four partition leader elections (pure)."""
