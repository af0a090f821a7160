"""Pure logic: stdlib and pydantic only, no I/O. Policy numbers arrive as arguments."""
