"""Declarative byte layouts of GPU code containers: bytes in, records out (no file walking, no policy)."""
