"""veloz: fast packet processing on Linux, and a lab that measures it."""
