"""``python -m spigap.native``: which engine this installation runs."""

from spigap import native

print(f"spigap engine: {native.engine()} ({native.status()})")
